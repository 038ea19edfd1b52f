"""The fast profile of the suite: ``scripts/test.sh --fast`` (``pytest -m "not slow"``).

The full suite is what CI runs. The fast profile is a contributor's inner loop: it
leaves out the tests listed here, each of which repeats at length what a test kept in
the profile already runs (a CLI run, a ``spark-submit``, one audit end to end), and
keeps every audit, the CLI's exit codes and one ``spark-submit`` (on ``local[2]``; the
``local-cluster`` ones are the full suite's), on a classic session (the Connect run is
the full suite's). ``KEEP`` names the tests that keep those promises;
``tests/test_profiles.py`` checks them and that every entry here names a test.
``tests/conftest.py`` marks every item listed here ``slow``.

An entry is a test file (every test in it), one test (``file::name``, any
parametrization of it) or one parametrization (``file::name[id]``), with what in the
fast profile covers the same ground.
"""

from __future__ import annotations

#: what the fast profile promises -> the test (or file) in it that keeps that promise;
#: tests/test_profiles.py checks that each is in the profile
KEEP: dict[str, str] = {
    "every audit (group, hfm, mdfa, correlation) end to end through the CLI":
        "tests/test_audit_contract.py::test_statuses_are_one_typed_set",
    "the CLI's exit codes": "tests/test_exit_codes.py",
    "one spark-submit": "tests/test_e2e_submit.py::"
                        "test_spark_submit_on_local_2_uses_the_submits_session_not_the_configs",
    "the group audit against fairlearn": "tests/test_group_audit.py::"
                                         "test_adult_catalogue_equals_fairlearn",
    "HFM against brute force and scipy": "tests/test_hfm_audit.py::"
                                         "test_adult_exact_equals_brute_force_and_scipy",
    "mdfa through the runner against pandas":
        "tests/test_mdfa_spark.py::test_runner_outcome_ratio_matches_pandas_and_report_redacts",
    "correlation's rows and clusters": "tests/test_correlation_spark.py::"
                                       "test_audit_rows_clusters_and_identities",
    "the report's numbers (the number walk)": "tests/test_number_walk.py",
    "the nightly window (day states written, merged, read back)":
        "tests/test_both_kinds_paths.py::test_window_same_on_both_kinds",
}

#: test file, ``file::test`` or ``file::test[id]`` -> what the fast profile keeps that
#: covers its ground
SLOW: dict[str, str] = {
    "tests/test_benchmarks_fast.py": "each audit's own tests (the scripts run it)",
    "tests/test_artifact_e2e.py": "test_e2e_submit's spark-submit on local-cluster",
    "tests/test_fault_tolerance.py": "the partition-independence tests of each audit",
    "tests/test_outputs_faults.py": "test_outputs_kinds (publishing a date whole)",
    "tests/test_publish_e2e.py": "test_outputs_kinds (a killed publish keeps the old run)",
    "tests/test_small_driver.py::test_a_1g_driver_publishes_the_group_audit_of_a_wide_table":
        "test_small_driver's in-process refusal (the heap check); a real 1 GB JVM is the "
        "full suite's",
    "tests/test_small_driver.py::test_a_1g_driver_runs_hfms_spark_path_to_the_driver_paths_distances":
        "test_hfm_spark's Spark-path tests (the same engine on a session's default heap)",
    "tests/test_small_driver.py::test_row_groups_two_tasks_cannot_hold_are_read_by_one_and_every_audit_publishes":
        "test_small_driver's in-process refusal (the heap check); a real 1 GB JVM is the "
        "full suite's",
    "tests/test_small_driver.py::test_row_groups_no_task_of_a_small_driver_can_hold_stop_the_run_before_any_output":
        "test_small_driver's in-process refusal (the same check and exit 2 on a small table, "
        "the heap per byte raised); the 512 MB JVM and its 600 MB table are the full suite's",
    "tests/test_jvm_death.py": "test_exit_codes (a failed run's status)",
    "tests/test_signals_work.py": "test_exit_codes; signals are the full suite's",
    "tests/test_budgets.py": "test_correlation_spark's time budget test",
    "tests/test_window.py":
        "test_both_kinds_paths' window (day states written, merged and read back on a "
        "rerun)",
    "tests/test_report_browser.py": "test_report (the report's HTML, without a browser)",
    "tests/test_mlflow_registry.py": "the full suite (the registry needs MLflow runs)",
    "tests/test_connect_cli.py": "the Connect run of the full suite",
    "tests/test_bad_input_round2.py": "test_exit_codes (bad input exits 2, naming the column)",
    "tests/test_add_an_audit.py": "test_audit_contract (the audit contract)",
    "tests/test_readme.py": "test_e2e_submit and test_exit_codes run the same commands",
    "tests/test_e2e_submit.py::test_hfm_certified_exact_with_1m_result_size":
        "test_e2e_submit's other spark-submit and test_hfm_audit",
    "tests/test_e2e_submit.py::test_spark_submit_local_cluster_50mb_with_1m_result_size":
        "test_e2e_submit's spark-submit on local[2] (the job's entry point, a small table)",
    "tests/test_hfm_spark.py::test_results_do_not_depend_on_partitioning":
        "test_hfm_spark's elimination engine against scipy (the same value, witness, counts "
        "and mean on 1 and 4 partitions, both engines); the approximate values' partition "
        "independence is the full suite's",
    "tests/test_info_lines.py":
        "test_report_figures (the legend mover, on figures drawn there) and "
        "test_number_walk's demo (every audit rendered; its INFO lines checked against "
        "test_info_lines' kinds)",
    "tests/test_baseline.py::test_hfm_and_mdfa_compare_the_baseline_and_say_so":
        "test_hfm_baseline and test_mdfa_baseline (each audit's baseline rows) and "
        "test_baseline's group comparison",
    "tests/test_hfm_dr.py::test_model_that_needs_a_missing_column_fails_the_dr_row_only":
        "test_hfm_dr's unloadable models (DR errors name the key and the path) and "
        "test_exit_codes' failed audit (the others complete)",
    "tests/test_both_kinds_audits.py::test_mdfa_same_on_both_kinds":
        "test_mdfa_spark's runner outcome ratio against pandas; the Connect run is the "
        "full suite's",
    "tests/test_both_kinds_audits.py::test_correlation_same_on_both_kinds":
        "test_correlation_spark's audit rows test; the Connect run is the full suite's",
    "tests/test_hfm_spark.py::test_elimination_engine_equals_scipy[uniform-driver]":
        "its [clustered-spark] parametrization (the Spark passes on 1 and 4 partitions) and "
        "test_hfm_audit's Adult run against scipy (the driver engine, the default on "
        "small tables)",
    "tests/test_hfm_spark.py::test_elimination_engine_equals_scipy[clustered-driver]":
        "its [clustered-spark] parametrization (the same points on 1 and 4 partitions) and "
        "test_hfm_audit's Adult run against scipy (the driver engine, the default on "
        "small tables)",
    "tests/test_hfm_spark.py::test_elimination_engine_equals_scipy[duplicated-driver]":
        "its [duplicated-spark] parametrization (the same points on 1 and 4 partitions) and "
        "test_hfm_audit's Adult run against scipy (the driver engine, the default on "
        "small tables)",
    "tests/test_hfm_spark.py::test_elimination_engine_equals_scipy[ties-driver]":
        "its [ties-spark] parametrization (the same points on 1 and 4 partitions) and "
        "test_hfm_audit's Adult run against scipy (the driver engine, the default on "
        "small tables)",
    "tests/test_nightly.py::test_three_nights_trend_the_worst_groups_series_with_its_limit":
        "test_report_charts' worst-group trend (the same rule on rows written there) and "
        "test_baseline's two nights read back through the runner",
    "tests/test_report_hostile.py":
        "test_report's escaping of user text (a dataset name with markup, shown as text) and "
        "test_audit_contract's run of every audit (each section rendered); a hostile table "
        "through every section, and Chromium, are the full suite's",
    "tests/test_hfm_spark.py::test_elimination_engine_equals_scipy[uniform-spark]":
        "its [clustered-spark], [duplicated-spark] and [ties-spark] parametrizations (the "
        "same engine on 1 and 4 partitions, harder points)",
    "tests/test_null_generator.py::test_cross_fitted_probability_ignores_the_rows_own_decision[137]":
        "its [0] parametrization (the same flip of one row's decision)",
    "tests/test_null_generator.py::test_cross_fitted_probability_ignores_the_rows_own_decision[402]":
        "its [0] parametrization (the same flip of one row's decision)",
    "tests/test_task_partitioning.py::test_correlation_same_attempts_for_1_2_7_and_default_chunks":
        "test_correlation_spark's partition-independence test",
    "tests/test_task_partitioning.py::test_mdfa_same_splits_for_1_2_7_and_default_chunks":
        "test_mdfa_spark's partition-independence test",
    "tests/test_mdfa_validation.py::test_planted_gamma_is_recovered":
        "test_mdfa_validation's fair classifier and test_mdfa_spark",
    "tests/test_conf_examples.py::test_example_config_runs":
        "test_conf_examples' parse of every example and test_exit_codes' run",
    "tests/test_hfm_audit.py::test_compas_certified_equals_brute_force_and_scipy":
        "test_hfm_audit's Adult run against brute force and scipy",
    "tests/test_hfm_audit.py::test_driver_and_spark_paths_give_the_same_bits":
        "test_hfm_spark's driver path against the Spark passes",
    "tests/test_hfm_audit.py::test_driver_path_and_spark_passes_give_the_same_audit":
        "test_hfm_spark's driver path against the Spark passes",
    "tests/test_hfm_audit.py::test_partial_intervals_while_certifying_contain_exact":
        "test_hfm_audit's Adult run against brute force and scipy",
    "tests/test_hfm_spark.py::test_approx_and_pointwise_equal_naive_algorithm":
        "test_hfm_spark's elimination engine against scipy",
    "tests/test_hfm_spark.py::test_survivor_rounds_jump_to_the_end_after_a_poor_round":
        "test_hfm_spark's elimination engine against scipy",
    "tests/test_hfm_spark.py::test_survivor_pass_equals_brute_force":
        "test_hfm_spark's elimination engine against scipy",
    "tests/test_group_audit.py::test_one_pass_gives_the_staged_flows_results":
        "test_group_audit's one-pass statistics against the statistics pass",
    "tests/test_gating_per_group.py::test_a_night_whose_data_move_is_called_worse_then_better":
        "test_gating_per_group's verdicts per group",
    "tests/test_broken_plugin.py::test_a_run_reports_the_broken_plugin_and_the_other_audits_complete":
        "test_broken_plugin's import checks and test_exit_codes' failed audit",
    "tests/test_column_names.py": "test_group_audit (the same audit on plain names)",
    "tests/test_window_results.py::test_window_mdfa_and_correlation_equal_the_same_audits_on_the_sample_rows":
        "test_both_kinds_paths' window (the group audit's) and test_mdfa_spark and "
        "test_correlation_spark (the audits); a window's sample is the full suite's",
    "tests/test_window_results.py::test_window_limits_and_trends_equal_a_rescan_over_two_nights":
        "test_both_kinds_paths' window (day states written, merged and read back on a "
        "rerun) and test_gating",
    "tests/test_gating.py::test_a_where_change_is_on_the_first_screen_and_words_agree":
        "test_gating's other first-screen tests",
    "tests/test_worker_python.py":
        "test_stage_table's test of when the CLI probes the workers (workers_are_the_drivers)",
    "tests/test_gating_per_group.py::test_per_group_values_intervals_and_verdicts":
        "test_gating's verdicts",
    "tests/test_hfm_audit.py::test_notebook_hfm_audit_on_both_session_kinds":
        "test_hfm_audit's Adult run against brute force and scipy",
    "tests/test_window_results.py::test_window_hfm_sample_equals_hfm_on_the_sample_rows":
        "test_window_results' sample-size check, test_both_kinds_paths' window and "
        "test_hfm_audit; a window's sample is the full suite's",
    "tests/test_cli_text.py::test_a_missing_input_is_one_line_without_java_frames":
        "test_exit_codes' missing-column runs",
    "tests/test_mdfa_validation.py::test_fair_classifier_gives_gamma_near_zero":
        "test_mdfa_spark's audit and test_mdfa_kernels",
    "tests/test_mdfa_validation.py::test_compas_race_gamma_and_its_null_reference":
        "test_mdfa_spark's audit and test_mdfa_kernels",
    "tests/test_gating.py::test_a_run_that_does_not_gate_says_would_gate_and_counts_three_in_a_row":
        "test_nightly's gating rules",
    "tests/test_window_checks.py":
        "test_both_kinds_paths' window (day states written, merged and read back on a "
        "rerun)",
    "tests/test_schema_drift.py::test_a_changed_schema_is_reported_and_trends_are_not_compared":
        "test_schema_drift's exit-2 checks",
    "tests/test_schema_drift.py::test_an_unchanged_schema_keeps_the_runs_comparable":
        "test_schema_drift's exit-2 checks",
    "tests/test_correlation_rounds.py::test_auto_stops_when_the_representatives_are_stable":
        "test_correlation_rounds' brute-force stop",
    "tests/test_correlation_rounds.py::test_auto_at_rounds_max_reports_the_se_reached":
        "test_correlation_rounds' brute-force stop",
    "tests/test_hfm_dr.py::test_dr_with_spark_pipeline_equals_direct_scoring":
        "test_hfm_dr's other DR checks",
    "tests/test_hfm_audit.py::test_any_other_value_view_equals_brute_force":
        "test_hfm_audit's Adult run against brute force and scipy",
    "tests/test_hfm_audit.py::test_repeated_row_key_is_refused_not_merged":
        "test_exit_codes' bad-input runs",
    "tests/test_hfm_baseline.py::test_baseline_d_f_equals_scipy_on_the_baseline_points":
        "test_hfm_audit's Adult run against scipy",
    "tests/test_exit_codes.py::test_rerun_replaces_the_date_and_keeps_others":
        "test_outputs_kinds (a rerun replaces only its date)",
    "tests/test_mdfa_cost.py::test_auto_splits_stop_by_the_predicted_narrowing":
        "test_mdfa_cost's waves test",
    "tests/test_baseline.py::test_staged_flow_and_sample_count_the_joint_cells_too":
        "test_baseline's paired differences against pandas",
    "tests/test_mdfa_baseline.py::test_the_baseline_is_an_mdfa_run_of_its_own_on_the_same_rows_and_splits":
        "test_mdfa_baseline's other checks",
    "tests/test_correlation_spark.py::test_time_budget_hands_over_complete_rounds_and_stops":
        "test_audit_contract's time budgets",
    "tests/test_correlation_spark.py::test_end_to_end_through_the_runner":
        "test_correlation_spark's audit rows test",
    "tests/test_hfm_spark.py::test_pass_a_tasks_send_the_top_bounds_of_the_job_of_their_own":
        "test_hfm_spark's elimination engine against scipy",
    "tests/test_hfm_spark.py::test_driver_path_equals_spark_passes":
        "test_hfm_spark's elimination engine on both engines",
    "tests/test_hfm_spark.py::test_every_method_gives_the_same_rows_on_both_session_kinds":
        "the full suite's Connect run",
    "tests/test_audit_contract.py::test_time_budget_is_kept_by_every_audit":
        "test_budgets in the full suite; test_audit_contract's other checks",
    "tests/test_audit_contract.py::test_unknown_attribute_exits_2_before_any_output":
        "test_exit_codes (exit 2 before any output)",
    "tests/test_group_audit.py::test_one_pass_statistics_equal_the_statistics_pass":
        "test_group_audit's Adult catalogue against fairlearn",
    "tests/test_mdfa_kernels.py::test_worst_violation_bisection_equals_sequential_and_finds_g":
        "test_mdfa_kernels' other kernel checks",
    "tests/test_both_kinds_paths.py::test_readme_notebook_example_same_on_both_kinds":
        "test_notebook (the notebook API)",
    "tests/test_hfm_spark.py::test_certified_is_exact_with_candidate_count":
        "test_hfm_spark's elimination engine against scipy",
    "tests/test_mdfa_validation.py::test_compas_gender_gamma_matches_an_importance_sampling_reference":
        "test_mdfa_spark's audit and test_mdfa_kernels",
    "tests/test_hfm_baseline.py::test_baseline_rows_equal_an_independent_run_with_the_baseline_as_prediction":
        "test_hfm_baseline's other checks and test_baseline",
}


def is_slow(nodeid: str) -> bool:
    """Whether the test ``nodeid`` (as pytest names it) is outside the fast profile."""
    path, _, rest = nodeid.partition("::")
    name = rest.partition("[")[0]
    return path in SLOW or f"{path}::{name}" in SLOW or nodeid in SLOW
