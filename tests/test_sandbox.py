"""The sandbox on the real path (bubblewrap + prlimit): hostile programs are contained and reported."""

import asyncio
import os
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from openconductor.sandbox import (
    SandboxError,
    SandboxLimits,
    SandboxSettings,
    SandboxUnavailable,
    check_sandbox,
    load_sandbox_settings,
    run_python,
    run_python_pair,
    run_python_sync,
)

FAST = SandboxLimits(wall_s=3.0, cpu_s=1, memory_mb=256)


def _processes_with(token: str) -> list[str]:
    """Host processes whose command line contains ``token`` (leftovers of a sandbox run)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if token in cmd:
            found.append(f"{entry.name}: {cmd}")
    return found


def test_sandbox_is_available_here():
    # CI installs bubblewrap; a machine without it must fail loudly, not run unsandboxed.
    assert check_sandbox().startswith("bubblewrap")


def test_normal_program_passes_with_stdin():
    res = run_python_sync("import sys\nprint(sys.stdin.read().upper())\nprint(sum(range(10)))", stdin="hello")
    assert res.status == "ok", res
    assert res.stdout == "HELLO\n45\n"
    assert res.exit_code == 0 and res.sandboxed and res.reason == ""


def test_program_error_is_reported():
    res = run_python_sync("raise ValueError('boom')")
    assert res.status == "error" and res.exit_code == 1
    assert "ValueError: boom" in res.reason


def test_infinite_loop_is_stopped():
    start = time.perf_counter()
    res = run_python_sync("while True:\n    pass", limits=FAST)
    assert res.status in ("cpu_time", "timeout"), res
    assert "limit" in res.reason
    assert time.perf_counter() - start < 8


def test_sleeping_program_hits_wall_clock_and_group_is_killed():
    token = f"oc-{uuid.uuid4().hex}"
    code = (
        "import subprocess, time, sys\n"
        f"subprocess.Popen(['sleep', '1000', '{token}'])\n"  # a grandchild that would outlive us
        "time.sleep(1000)\n"
    )
    res = run_python_sync(code, limits=SandboxLimits(wall_s=1.5))
    assert res.status == "timeout" and res.exit_code is None
    assert "wall-clock" in res.reason
    time.sleep(0.2)
    assert _processes_with(token) == []


def test_fork_bomb_is_contained():
    token = f"oc-{uuid.uuid4().hex}"
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    start = time.perf_counter()
    res = run_python_sync(code, limits=SandboxLimits(wall_s=2.0, cpu_s=2, processes=8), args=[token])
    assert res.status != "ok"
    assert time.perf_counter() - start < 10
    time.sleep(0.3)
    assert _processes_with(token) == []  # the pid namespace died with the run


def test_fork_bomb_that_gives_up_reports_the_process_limit():
    # Children that stay alive: the parent's fork fails at the limit every time. (With children that
    # fork too, each child that hits the limit exits and frees a slot, so when the parent hits it
    # depends on scheduling; on a loaded machine it could take longer than the wall clock.)
    code = "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(30)\n"
    res = run_python_sync(code, limits=SandboxLimits(wall_s=5.0, processes=8))
    assert res.status == "error"
    assert "process/thread limit of 8" in res.reason


def test_memory_hog_is_stopped():
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))\n"
    res = run_python_sync(code, limits=SandboxLimits(wall_s=10.0, memory_mb=128))
    assert res.status == "memory", res
    assert "128 MiB" in res.reason


def test_writes_outside_its_dir_fail_and_host_is_unharmed(tmp_path):
    name = f"oc-escape-{uuid.uuid4().hex}"
    worktree_target = Path(__file__).resolve().parent / name
    host_tmp_target = tmp_path / name
    code = f"""
import os
results = []
for path in [{str(worktree_target)!r}, {str(host_tmp_target)!r}, '/usr/{name}', '/{name}', '/etc/{name}']:
    try:
        open(path, 'w').write('pwned')
        results.append('WROTE ' + path)
    except OSError as exc:
        results.append('denied ' + path + ' ' + type(exc).__name__)
open('/tmp/{name}', 'w').write('inside')  # its own /tmp (the sandbox tmpfs): allowed
open('{name}', 'w').write('cwd')  # its own cwd: allowed
print('\\n'.join(results))
raise SystemExit(1 if any(r.startswith('WROTE') for r in results) else 0)
"""
    res = run_python_sync(code)
    assert res.status == "ok", res.stdout + res.stderr
    assert "WROTE" not in res.stdout and res.stdout.count("denied") == 5
    assert not worktree_target.exists()
    assert not host_tmp_target.exists()
    assert not Path("/tmp", name).exists()  # the sandbox's /tmp is not the host's
    assert not Path("/usr", name).exists()


def test_disk_quota_of_its_tmpfs():
    res = run_python_sync("open('big', 'wb').write(b'x' * (40 << 20))", limits=SandboxLimits(disk_mb=8, file_size_mb=64))
    assert res.status == "error"
    assert "No space left" in res.stderr


def test_file_size_limit():
    res = run_python_sync("open('big', 'wb').write(b'x' * (3 << 20))", limits=SandboxLimits(file_size_mb=1))
    assert res.status == "error"
    assert "File too large" in res.stderr


def test_no_network_even_to_a_loopback_server_on_the_host():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list = []
    stop = threading.Event()

    def accept_loop():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                accepted.append(conn)
            except socket.timeout:
                continue

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    try:
        # Sanity: the server is reachable from the host.
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        time.sleep(0.3)
        assert len(accepted) == 1
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
        res = run_python_sync(code)
        assert res.status == "error"
        assert "ConnectionRefusedError" in res.reason or "Network is unreachable" in res.stderr
        res = run_python_sync("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=3)\n")
        assert res.status == "error"
        time.sleep(0.3)
        assert len(accepted) == 1  # nothing from inside the sandbox arrived
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()


def test_parent_environment_is_not_visible(monkeypatch):
    secret = f"s3cret-{uuid.uuid4().hex}"
    monkeypatch.setenv("OC_FAKE_API_KEY", secret)
    code = """
import os, glob
print(sorted(os.environ))
print(dict(os.environ))
for path in glob.glob('/proc/*/environ'):
    try:
        print(path, open(path, 'rb').read())
    except OSError as exc:
        print(path, exc)
"""
    res = run_python_sync(code)
    assert res.status == "ok", res
    assert secret not in res.stdout and "OC_FAKE_API_KEY" not in res.stdout
    assert "'HOME'" in res.stdout  # it did print its environment


def test_output_is_truncated_not_unbounded():
    res = run_python_sync("import sys\nsys.stdout.write('x' * (5 << 20))", limits=SandboxLimits(max_output_bytes=4096))
    assert res.status == "ok"
    assert res.truncated and len(res.stdout) == 4096


def test_output_dropped_before_a_wall_clock_timeout_is_reported_as_truncated():
    # 2 MiB written, 1 MiB kept, then the program outlives its wall clock: the readers are cancelled, the drop is still known.
    code = "import sys, time\nsys.stdout.write('x' * (2 << 20)); sys.stdout.flush()\ntime.sleep(60)"
    res = run_python_sync(code, limits=SandboxLimits(wall_s=3.0, max_output_bytes=1 << 20))
    assert res.status == "timeout", res
    assert res.truncated and len(res.stdout) == 1 << 20


async def test_concurrency_is_bounded():
    settings = SandboxSettings(max_concurrency=2)
    start = time.perf_counter()
    results = await asyncio.gather(*(run_python("import time; time.sleep(0.4)", settings=settings) for _ in range(6)))
    elapsed = time.perf_counter() - start
    assert all(r.status == "ok" for r in results)
    assert elapsed >= 1.15  # 6 runs, 2 at a time, 0.4 s each: at least 3 rounds


async def test_sync_wrapper_works_inside_a_running_loop():
    res = run_python_sync("print(1 + 1)")
    assert res.stdout == "2\n"


def test_missing_bwrap_raises_typed_error_with_install_hint():
    with pytest.raises(SandboxUnavailable) as err:
        run_python_sync("print(1)", settings=SandboxSettings(bwrap="/nonexistent/bwrap"))
    assert "apt-get install -y bubblewrap" in str(err.value)
    assert "allow_unsandboxed" in str(err.value)


def test_explicit_opt_in_runs_unsandboxed_and_says_so(monkeypatch):
    monkeypatch.setenv("OC_FAKE_API_KEY", "visible-if-env-leaks")
    settings = SandboxSettings(bwrap="/nonexistent/bwrap", allow_unsandboxed=True)
    res = run_python_sync("import os\nprint(os.environ.get('OC_FAKE_API_KEY'))", settings=settings)
    assert res.status == "ok" and res.sandboxed is False
    assert "UNSANDBOXED" in res.reason
    assert res.stdout.strip() == "None"  # still a clean environment
    res = run_python_sync("while True: pass", settings=settings, limits=FAST)
    assert res.status in ("cpu_time", "timeout")


def test_bad_code_argument_is_a_typed_error():
    with pytest.raises(SandboxError):
        run_python_sync(b"print(1)")  # type: ignore[arg-type]


def test_settings_from_toml(tmp_path):
    path = tmp_path / "sandbox.toml"
    path.write_text('[sandbox]\nmax_concurrency = 3\nallow_unsandboxed = false\n')
    assert load_sandbox_settings(path).max_concurrency == 3
    path.write_text('[sandbox]\nmax_concurency = 3\n')
    with pytest.raises(SandboxError, match="max_concurency"):
        load_sandbox_settings(path)
    with pytest.raises(SandboxError, match="does not exist"):
        load_sandbox_settings(tmp_path / "missing.toml")


def test_no_nested_user_namespaces():
    from openconductor.sandbox import _plan_for

    if "--disable-userns" not in _plan_for(SandboxSettings()).features:
        pytest.skip("this bubblewrap is older than 0.8 (no --disable-userns)")
    code = "import subprocess\nr = subprocess.run(['unshare', '--user', '--map-root-user', 'id'], capture_output=True, text=True)\nprint(r.returncode, r.stderr)"
    res = run_python_sync(code)
    assert res.status == "ok"
    assert not res.stdout.startswith("0 "), res.stdout  # unshare failed inside the sandbox


async def test_cancelling_a_run_kills_it_and_frees_its_slot():
    token = f"oc-{uuid.uuid4().hex}"
    settings = SandboxSettings(max_concurrency=1)
    task = asyncio.ensure_future(run_python("import time\ntime.sleep(100)", settings=settings, args=[token]))
    await asyncio.sleep(1.0)
    assert _processes_with(token)  # it is running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.3)
    assert _processes_with(token) == []
    res = await asyncio.wait_for(run_python("print('next')", settings=settings), timeout=10)
    assert res.stdout == "next\n"  # the slot was released


def test_without_a_memory_cgroup_or_seccomp_runs_still_work_and_say_why(monkeypatch, caplog):
    import openconductor.sandbox_plan as sandbox_plan

    monkeypatch.setattr(sandbox_plan, "memory_cgroups", lambda: (None, "no cgroup filesystem at /sys/fs/cgroup"))
    monkeypatch.setattr(sandbox_plan, "seccomp_program", lambda: (None, "pyseccomp/libseccomp unavailable"))
    settings = SandboxSettings(max_concurrency=7)  # a settings value no other test uses: probed afresh
    with caplog.at_level("WARNING", logger="openconductor.sandbox"):
        described = check_sandbox(settings)
    assert "no memory cgroup" in described and "no seccomp" in described
    assert "no memory cgroup (no cgroup filesystem at /sys/fs/cgroup)" in caplog.text
    assert "bounded per process" in caplog.text
    res = run_python_sync("import os\nos.memfd_create('x')\nprint('ok')", settings=settings)
    assert res.status == "ok" and res.peak_memory_mb is None


async def test_a_pair_talks_only_through_its_pipes():
    worker = "import sys\nfor line in sys.stdin:\n    print(int(line) * 2, flush=True)\n"
    driver = (
        "import os, sys\n"
        "replies, requests = os.fdopen(int(sys.argv[1])), os.fdopen(int(sys.argv[2]), 'w')\n"
        "for n in (1, 2, 3):\n"
        "    requests.write(f'{n}\\n'); requests.flush()\n"
        "    print(replies.readline().strip())\n"
    )
    pair = await run_python_pair(driver, worker)
    assert pair.driver.status == "ok" and pair.driver.stdout.split() == ["2", "4", "6"]
    assert pair.worker.status in ("ok", "stopped")
    # a worker that never ends is stopped as soon as the driver is done
    start = time.perf_counter()
    pair = await run_python_pair("print('done')", "import time\ntime.sleep(100)")
    assert pair.driver.stdout == "done\n" and pair.worker.status == "stopped"
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("one_by_one", [False, True])
def test_killing_a_run_ends_every_process_in_its_cgroup(one_by_one):
    """What a stopped or timed-out run does besides killing its process group: a process bubblewrap left
    behind (killed before it armed --die-with-parent) would otherwise hold the run's pipes open.
    one_by_one: the path of cgroup v1 (and of v2 before Linux 5.14), tried on this machine's cgroup."""
    import subprocess

    from openconductor.sandbox_kernel import RunCgroup, memory_cgroups

    cgroups, why = memory_cgroups()
    if cgroups is None:
        pytest.skip(f"no memory cgroups here: {why}")
    run = cgroups.create(64 << 20)
    try:
        proc = subprocess.Popen(["sh", "-c", 'echo $$ > "$0" && exec sleep 60', str(run.procs)], start_new_session=True)
        for _ in range(200):
            if run.procs.read_text().split():
                break
            time.sleep(0.01)
        assert str(proc.pid) in run.procs.read_text().split()
        (RunCgroup(run.path, 1) if one_by_one else run).kill()
        assert proc.wait(timeout=5) == -9
    finally:
        run.remove()
