"""A toy fifth audit that lives in the tests only (``tests/test_add_an_audit.py``).

It is registered through the ``fairspark.audits`` entry-point group by the test alone;
nothing in ``fairspark/`` names it. Per attribute it reports the difference in the
favourable-decision rate between the unprivileged and the privileged rows, with a
normal-approximation confidence interval.
"""
