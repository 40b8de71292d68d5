

def test_report_says_when_precisions_ran_concurrently():
    """On a Dask engine the precision passes run side by side, so their wall times overlap;
    the report says so (before, three wall times that add up to more than the run's)."""
    from systolica.workloads.minilm.report import concurrent

    two_workers = SimpleNamespace(workers={"tcp://a": 30, "tcp://b": 30})
    one_worker = SimpleNamespace(workers={"local": 60})
    precisions = {"bf16": None, "int8": None, "fp8": None}
    assert concurrent(SimpleNamespace(runs=precisions, ledger=two_workers))
    assert not concurrent(SimpleNamespace(runs=precisions, ledger=one_worker))
    assert not concurrent(SimpleNamespace(runs={"bf16": None}, ledger=two_workers))
