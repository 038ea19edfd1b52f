# ruff: noqa: E501
"""Jinja2 template of the mdfa report section (kept in a module so no package data is needed)."""

SECTION_TEMPLATE = r"""<div class="mdfa">
<p>mdfa (multi-differential fairness auditor) asks whether, among individuals with similar
audit features, the classifier's decisions still reveal the sensitive attribute.
<b>gamma</b> combines the size of a sub-population and how strongly decisions depend on
the attribute inside it (Eq. 4 of the paper; 0 = no evidence, negative = none found);
<b>delta</b> is the log-ratio of decision rates between the groups inside the worst
sub-population that keeps at least alpha = {{ params.alpha }} of the mass; <b>DT_G</b> is that
ratio itself and <b>DI</b> its counterpart over the whole table. s = +1 is the
{{ params.target_group }} group. Auditor: {{ params.auditor }} on the
{{ params.certificate_features }} features, balancing {{ params.balancing }}
({{ params.mmd_kernel }} kernel), {{ params.splits }} random
{{ ((1 - params.test_fraction) * 100)|round|int }}/{{ (params.test_fraction * 100)|round|int }} splits.</p>
<table class="metrics">
<thead><tr><th>attribute</th><th>s = +1</th><th>gamma (y=+1)</th><th>gamma (y=-1)</th>
<th>gamma max: mean (sd) [2.5%, 97.5%]</th><th>verdict</th><th>delta</th><th>DT_G</th><th>DI</th></tr></thead>
<tbody>
{% for r in results %}
<tr><td>{{ r.attribute }}</td><td>{{ r.target }}</td><td>{{ r.g_pos }}</td><td>{{ r.g_neg }}</td>
<td>{{ r.g_max }}</td><td>{{ r.verdict }}</td><td>{{ r.delta }}</td><td>{{ r.dt_g }}</td><td>{{ r.di }}</td></tr>
{% endfor %}
</tbody></table>
{% if figure %}<p><img alt="mdfa gamma over splits and delta across Algorithm 1" src="{{ figure }}"></p>{% endif %}
{% for r in results %}{% if r.desc_rows %}
<h4>{{ r.attribute }}: worst-treated sub-population (Algorithm 1, y = {{ r.y_label }})</h4>
<p>Mean (standard deviation) of each description column: population over all audited rows,
sub-population over the held-out rows of each split, averaged over splits. "rate" is
Pr[Y = {{ r.y_label }}] in the group.{% if redacted %} Redacted columns not shown: {{ redacted|join(', ') }}.{% endif %}</p>
<table class="metrics">
<thead><tr><th>column</th><th>population s=+1</th><th>population s=-1</th><th>sub-population s=+1</th><th>sub-population s=-1</th></tr></thead>
<tbody>
{% for d in r.desc_rows %}<tr><td>{{ d[0] }}</td><td>{{ d[1] }}</td><td>{{ d[2] }}</td><td>{{ d[3] }}</td><td>{{ d[4] }}</td></tr>
{% endfor %}
</tbody></table>
{% if r.rules %}<p>Readable rules: a depth-{{ params.rule_depth }} decision tree fitted to the
certificate on the held-out rows of the median-delta split (agreement with the certificate
{{ r.fidelity }}); class True = in the sub-population.</p>
<pre>{{ r.rules }}</pre>{% endif %}
{% endif %}{% endfor %}
</div>
"""
