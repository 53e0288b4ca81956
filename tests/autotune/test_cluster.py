"""Tuning through a real Dask cluster (a LocalCluster of two worker processes): records with
hosts, the log applied at compile time, the command line, a worker of another CPU refusing,
and a worker killed in the middle of tuning."""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import threading
import time

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import tensorc
from tensorc.autotune.measure import MeasureOptions, RunJob
from tensorc.autotune.records import TuningLog, make_record, target_string
from tensorc.cli.main import main
from tensorc.errors import TensorcError
from tensorc.target import Target

distributed = pytest.importorskip("distributed")

from tensorc.autotune.cluster import (  # noqa: E402  (after the skip)
    DaskExecutor, import_distributed, measure_on_worker, target_mismatch,
)

OPTIONS = dict(repeats=3, min_repeat_seconds=0.002, num_threads=1)


def matmul_relu_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    b = rng.standard_normal((64, 48)).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
        "matmul_relu", [helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, (32, 64))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, (32, 48))],
        initializer=[numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("cluster") / "matmul_relu.onnx"
    onnx.save(matmul_relu_model(), str(path))
    return path


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  resources={"measure": 1}, dashboard_address=None,
                                  silence_logs=logging.CRITICAL) as local:
        yield local


@pytest.fixture(scope="module")
def client(cluster):
    with distributed.Client(cluster) as c:
        yield c


def read_lines(path) -> list[dict]:
    """Every line of the log, each of which must be a whole JSON record."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_tune_on_the_cluster_records_hosts_and_compile_applies_them(tmp_path, model_path,
                                                                    client):
    log = tmp_path / "tune.jsonl"
    result = tensorc.tune(model_path, trials=8, batch=4, log=log, threads=1,
                          options=MeasureOptions(**OPTIONS), end_to_end=False, cluster=client)
    assert result.trials == 8
    records = [r for r in read_lines(log) if not r.get("confirmed")]     # the trials
    assert len(records) == 8
    assert all(r["error"] is None and r["latency"] > 0 for r in records)
    assert {r["host"] for r in records} == {socket.gethostname()}
    mod = tensorc.compile(model_path, tuning_log=log)
    assert mod.info["tuning"]["tuned_kernels"] == 1
    a = np.random.default_rng(1).standard_normal((32, 64)).astype("float32")
    want = tensorc.compile(model_path).run({"a": a})["y"]
    np.testing.assert_allclose(mod.run({"a": a})["y"], want, rtol=1e-4, atol=1e-5)


def test_tune_command_with_a_scheduler_address(tmp_path, model_path, cluster, capsys):
    log = tmp_path / "tune.jsonl"
    assert main(["tune", str(model_path), "--trials", "4", "--batch", "4", "--log", str(log),
                 "--threads", "1", "--cluster", cluster.scheduler_address, "--json",
                 "--no-end-to-end"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["trials"] == 4
    assert "2 workers on 1 hosts" in out.err
    assert all(r["host"] == socket.gethostname() for r in read_lines(log))


def test_a_worker_of_another_cpu_refuses_to_measure(client):
    host = Target.host()
    assert target_mismatch(target_string(host)) is None
    other = "skylake" if host.mcpu != "skylake" else "znver3"
    assert other in target_mismatch(f"llvm -mcpu={other}")
    enabled = sorted(f for f in host.features.split(",") if f.startswith("+"))
    fewer = f"llvm -mcpu={host.mcpu} -mattr={','.join(enabled[1:])}"
    assert enabled[0][1:] in target_mismatch(fewer)
    # what a worker answers: an error class, not a timing
    job = RunJob(b"", "entry", [], [], None, MeasureOptions(), target=f"llvm -mcpu={other}")
    refused = measure_on_worker(job, MeasureOptions())
    assert refused.error == "target_mismatch" and refused.latency is None
    assert refused.host == socket.gethostname()
    # a cluster where no worker has the target's CPU is an error before anything is sent
    executor = DaskExecutor(client)
    with pytest.raises(TensorcError, match="no worker of the Dask cluster"):
        executor.run([job], MeasureOptions())
    # where some workers refuse, measurements go only to the hosts of those that do not
    mine = target_string(host)
    assert executor._measure_placement(mine) == {"pure": False,
                                                 "resources": {"measure": 1}}
    refusing, fit = sorted(executor.workers())
    executor._fit[(refusing, mine)] = "another CPU"
    placement = executor._measure_placement(mine)
    assert placement["workers"] == [executor.workers()[fit]["host"]]
    assert not placement["allow_other_workers"]
    assert client.submit(socket.gethostname, **placement).result(timeout=30) == \
        socket.gethostname()


def test_old_logs_without_hosts_still_apply(tmp_path, model_path):
    from tensorc.autotune.task import extract_tasks
    [task] = extract_tasks(model_path, measure=False)
    record = make_record(task, task.space().default(), None, latency=1e-5)
    del record["host"]
    log = TuningLog(tmp_path / "old.jsonl")
    log.append(record)
    assert set(log.best_configs("llvm").best) == {task.workload}


def test_a_missing_distributed_names_the_extra(monkeypatch, model_path):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(TensorcError, match=r"pip install 'tensorc\[cluster\]'"):
        import_distributed()
    with pytest.raises(TensorcError, match=r"tensorc\[cluster\]"):
        tensorc.tune(model_path, trials=1, cluster="tcp://127.0.0.1:8786")


def test_an_unreachable_scheduler_is_a_clear_error():
    with pytest.raises(TensorcError, match="cannot reach the Dask scheduler.*dask scheduler"):
        DaskExecutor("tcp://127.0.0.1:9", connect_timeout=2)


def test_a_crashing_candidate_ends_a_child_not_the_dask_worker(client, model_path):
    from tensorc.autotune.measure import Candidate, measure
    from tensorc.autotune.task import extract_tasks
    [task] = extract_tasks(model_path, measure=False)
    default = task.space().default()
    workers = set(client.scheduler_info()["workers"])
    hooks = ["run_crash", "build_crash", "wrong_answer", None]
    executor = DaskExecutor(client)
    results = measure(executor, [Candidate(task, default, h) for h in hooks],
                      MeasureOptions(**OPTIONS))
    assert [r.error for r in results] == ["crash", "crash", "wrong_answer", None]
    assert "SIGSEGV" in results[0].message
    assert results[-1].latency > 0 and results[-1].host == socket.gethostname()
    assert set(client.scheduler_info()["workers"]) == workers     # no worker died


def test_a_cluster_without_workers_is_a_clear_error(monkeypatch):
    import tensorc.autotune.cluster as cluster_module
    monkeypatch.setattr(cluster_module, "WORKER_WAIT", 0.5)
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0",
                                  silence_logs=logging.CRITICAL) as empty, \
            DaskExecutor(empty) as executor:
        with pytest.raises(TensorcError, match="has no workers.*dask worker"):
            executor.build([], MeasureOptions())


def test_killing_a_worker_mid_measurement_loses_only_its_candidates(tmp_path, model_path,
                                                                    client):
    """Runs last: the killed worker's nanny starts a new one, but nothing here needs it."""
    log = tmp_path / "tune.jsonl"
    killed: dict = {}
    done = threading.Event()

    def kill_a_measuring_worker() -> None:
        while not done.is_set():
            if log.exists() and log.stat().st_size:
                busy = [w for w, keys in client.processing().items()
                        if any("tensorc-measure" in str(k) for k in keys)]
                if busy:
                    pid = client.run(os.getpid, workers=busy[:1])[busy[0]]
                    os.kill(pid, signal.SIGKILL)
                    killed[busy[0]] = pid
                    return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_a_measuring_worker, daemon=True)
    killer.start()
    # measurements long enough (warm-up plus 3 x 50 ms) that the kill lands inside one
    options = MeasureOptions(repeats=3, min_repeat_seconds=0.05, num_threads=1)
    try:
        result = tensorc.tune(model_path, trials=12, batch=4, log=log, threads=1,
                              options=options, end_to_end=False, cluster=client)
    finally:
        done.set()
        killer.join(10)
    assert killed, "the test never caught a worker measuring"
    assert result.trials == 12
    records = [r for r in read_lines(log) if not r.get("confirmed")]    # every line parses
    assert len(records) == 12
    assert all(r["error"] in (None, "worker_lost") for r in records)
    measured = [r for r in records if r["error"] is None]
    assert len(measured) >= 8 and all(r["host"] and r["latency"] > 0 for r in measured)
