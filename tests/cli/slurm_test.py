"""`npusim sweep --slurm` on a real Slurm: a single-node cluster (Debian's slurm-wlm with munge) that this test starts
on localhost in a folder of its own (its own munge key and socket, ports, state and spool) and stops. The sweep's
metrics through Slurm must be byte-identical to the same sweep run locally.

Environment: NPUSIM (the binary under test)."""
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import textwrap
import time

import pytest

NPUSIM = os.environ["NPUSIM"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """munged, slurmctld and slurmd in the foreground, as children of the test, configured through SLURM_CONF."""

    def __init__(self, root):
        self.root = root
        self.procs = []
        for d in ("state", "spool"):
            (root / d).mkdir(parents=True)
        root.chmod(0o755)  # munge checks that its socket's folder is reachable
        key = root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf = root / "slurm.conf"
        self.conf.write_text(textwrap.dedent(f"""\
            ClusterName=npusimtest
            SlurmctldHost=localhost
            AuthType=auth/munge
            AuthInfo=socket={root}/munge.sock
            CredType=cred/munge
            SlurmUser=root
            SlurmdUser=root
            SlurmctldPort={free_port()}
            SlurmdPort={free_port()}
            StateSaveLocation={root}/state
            SlurmdSpoolDir={root}/spool
            SlurmctldPidFile={root}/slurmctld.pid
            SlurmdPidFile={root}/slurmd.pid
            SlurmctldLogFile={root}/slurmctld.log
            SlurmdLogFile={root}/slurmd.log
            ProctrackType=proctrack/linuxproc
            TaskPlugin=task/none
            JobAcctGatherType=jobacct_gather/none
            AccountingStorageType=accounting_storage/none
            SchedulerType=sched/backfill
            SelectType=select/cons_tres
            SelectTypeParameters=CR_Core
            ReturnToService=2
            MpiDefault=none
            NodeName=localhost CPUs=2 RealMemory=4000 State=UNKNOWN
            PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
        """))
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))

    def start(self):
        r = self.root
        self.spawn(["munged", "-F", "-f", f"--key-file={r}/munge.key", f"--socket={r}/munge.sock",
                    f"--pid-file={r}/munged.pid", f"--log-file={r}/munged.log", f"--seed-file={r}/munged.seed"])
        self.wait(lambda: (r / "munge.sock").exists(), "munged")
        self.spawn(["slurmctld", "-D", "-c", "-f", str(self.conf)])
        self.spawn(["slurmd", "-D", "-N", "localhost", "-f", str(self.conf)])
        self.wait(lambda: subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True,
                                         text=True).stdout.strip() == "idle", "the node to be idle")

    def spawn(self, argv):
        if not shutil.which(argv[0]):
            raise AssertionError(f"{argv[0]} is missing: scripts/setup.sh installs slurm-wlm and munge")
        log = open(self.root / (argv[0] + ".out"), "w")
        self.procs.append(subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT))

    def wait(self, ready, what, limit=60):
        t0 = time.time()
        while time.time() - t0 < limit:
            if ready():
                return
            for p in self.procs:
                assert p.poll() is None, f"{p.args[0]} stopped: {self.logs()}"
            time.sleep(0.2)
        raise AssertionError(f"waited {limit}s for {what}: {self.logs()}")

    def logs(self):
        out = []
        for f in sorted(self.root.glob("*.log")) + sorted(self.root.glob("*.out")):
            out.append(f"--- {f.name}\n" + f.read_text()[-3000:])
        return "\n".join(out)

    def stop(self):
        subprocess.run(["scancel", "--user=root"], env=self.env, capture_output=True)
        for p in reversed(self.procs):
            p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("slurm"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


SPEC = """\
name: on_slurm
axes:
  grid:
    hbm.pin_rate: [1.6Gbps, 3.2Gbps]
    cores.aic: [12, 24]
  zip:
    cores.aiv: [48]
workloads:
  - name: mm
    op: matmul
    params: {M: 1024, N: 1024, K: 512}
  - op: softmax
    params: {shape: 512x1024}
metrics:
  - cycles
  - kernel.cycles
  - tflops: op.flops / (kernel.time_us * 1e6)
  - memory.hbm_read_bytes
"""


def metrics_by_key(folder):
    rows = [json.loads(l) for l in (folder / "results.jsonl").read_text().splitlines() if l.strip()]
    return {(r["point"], r["workload"]): (r["status"], r["config_hash"], json.dumps(r["metrics"], sort_keys=True), r["error"])
            for r in rows}


def npusim(*args, env=None, cwd=None, timeout=600):
    return subprocess.run([NPUSIM, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def test_slurm_sweep_gives_the_metrics_of_the_local_run(cluster, tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    local = npusim("sweep", "spec.yaml", "-j", "2", "-o", "local", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    p = npusim("sweep", "spec.yaml", "--slurm", "-o", "slurm", "--partition", "debug", "--time", "10",
               "--mem", "1G", "--array-tasks", "3", env=cluster.env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr + cluster.logs()
    assert "submitted slurm job" in p.stderr and "in 3 array tasks" in p.stderr
    a, b = metrics_by_key(tmp_path / "local"), metrics_by_key(tmp_path / "slurm")
    assert len(a) == 8 and a == b
    assert (tmp_path / "slurm" / "results.csv").read_text().count("\n") == 1 + 8
    # A point with a config the chip refuses is recorded the same way (cores.aiv 48 does not fit 12 AIC).
    assert [v[0] for k, v in sorted(b.items())].count("invalid") == 4
    # Nothing is left to submit.
    again = npusim("sweep", "spec.yaml", "--slurm", "-o", "slurm", env=cluster.env, cwd=tmp_path)
    assert again.returncode == 0 and "every run is finished" in again.stderr


def test_no_wait_status_and_resume_find_the_running_job(cluster, tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC.replace("M: 1024", "M: 2048"))
    p = npusim("sweep", "spec.yaml", "--slurm", "--no-wait", "-o", "out", env=cluster.env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr + cluster.logs()
    job = p.stdout.strip()
    assert job.isdigit()
    status = npusim("sweep", "spec.yaml", "--status", "-o", "out", env=cluster.env, cwd=tmp_path)
    assert status.returncode == 0 and f"slurm job {job}" in status.stdout
    # A local sweep in the same folder would run the job's runs again beside it: refused while the job is there.
    local = npusim("sweep", "spec.yaml", "-o", "out", env=cluster.env, cwd=tmp_path)
    if f"slurm job {job} of this sweep is still queued or running" not in local.stderr:
        # The job may have ended in between; then the local sweep merged it and found nothing left to run.
        assert local.returncode == 0 and "0 to run" in local.stderr, local.stderr
        return
    assert local.returncode == 1 and f"scancel {job}" in local.stderr
    # Resuming while the job is queued or running waits for it instead of submitting the runs again.
    p = npusim("sweep", "spec.yaml", "--slurm", "-o", "out", env=cluster.env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr + cluster.logs()
    assert sorted(d.name for d in (tmp_path / "out" / "slurm").iterdir() if d.is_dir()) == ["job-0"]
    rows = metrics_by_key(tmp_path / "out")
    assert len(rows) == 8 and sum(v[0] == "ok" for v in rows.values()) == 4
    status = npusim("sweep", "spec.yaml", "--status", "-o", "out", env=cluster.env, cwd=tmp_path)
    assert "8 runs: 4 ok, 0 failed, 0 timeout, 4 invalid, 0 not run" in status.stdout


def test_slurm_errors_are_named(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    env = dict(os.environ, PATH="/nonexistent")
    p = subprocess.run([NPUSIM, "sweep", "spec.yaml", "--slurm"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.returncode == 1 and "--slurm needs Slurm's sbatch on PATH" in p.stderr
