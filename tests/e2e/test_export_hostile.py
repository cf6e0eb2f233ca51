"""Hostile exports (issue 21): a tar is a bag and nothing else, a bag folder cannot hang or
crash the verify, and ``--rebuild`` runs the bag's code contained and judged by a result
file, not by what the code prints. Real tars, real processes, real signals.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import bagit
import psutil
import pytest

from cockpit.export import export_campaign
from cockpit.export.bagit_files import fetch_commands
from tests.e2e.test_export_sample import NOW, build_sample
from tests.helpers.process import run_cockpit, wait_for


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("hostile") / "campaign"
    campaign, state = build_sample(folder)
    result = export_campaign(campaign, state, now=NOW, verify_reload=False, tar=True)
    assert result.verified, result.verify.render()
    return result


def write_sha(tar: Path) -> None:
    digest = hashlib.sha256(tar.read_bytes()).hexdigest()
    tar.with_name(tar.name + ".sha256").write_text(f"{digest}  {tar.name}\n")


def tar_with(exported, out: Path, extra: list[tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]],
             first: bool = False) -> Path:
    """The export's bag as a tar, plus ``extra`` members (after the bag, or before it
    with ``first``), with a matching .sha256."""
    tar_path = out / "hostile.tar"
    with tarfile.open(tar_path, "w", format=tarfile.PAX_FORMAT) as tar:
        if not first:
            tar.add(exported.bag_dir, arcname=exported.bag_dir.name)
        for item in extra:
            info, data = item if isinstance(item, tuple) else (item, b"")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if first:
            tar.add(exported.bag_dir, arcname=exported.bag_dir.name)
    write_sha(tar_path)
    return tar_path


def verify(*words: str, timeout: float = 120, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    return run_cockpit("verify-export", *words, timeout=timeout, env=env)


def test_the_export_tar_itself_verifies(exported) -> None:
    done = verify(str(exported.tar_path), "--no-reload")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[ok  ] tar holds the bag only" in done.stdout


@pytest.mark.parametrize(("name", "first"), [
    (".bashrc", False), (".bashrc", True), (".ssh/authorized_keys", False),
    ("/tmp/cockpit-abs-planted", False), ("sample-close/../escaped", False)])
def test_a_member_beside_the_bag_fails_and_nothing_is_unpacked(exported, tmp_path: Path,
                                                                name: str, first: bool) -> None:
    tar_path = tar_with(exported, tmp_path, [(tarfile.TarInfo(name), b"echo pwned\n")], first)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    done = verify(str(tar_path), "--no-reload", env={"TMPDIR": str(tmpdir)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[FAIL] tar holds the bag only" in done.stdout
    assert f"{name}: " in done.stdout  # the member itself is named
    assert not list(tmpdir.iterdir())  # refused before anything was written
    assert not Path("/tmp/cockpit-abs-planted").exists()


def _list_in_the_bag(bag: Path, rel: str, size: int) -> None:
    """List a file in the manifest and Payload-Oxum without hashing it (its digest is
    made up): bagit then has to hash it to find out, which for 1 TiB takes hours."""
    with open(bag / "manifest-sha256.txt", "a") as handle:
        handle.write(f"{'0' * 64}  {rel}\n")
    info = (bag / "bag-info.txt").read_text().splitlines()
    for i, line in enumerate(info):
        if line.startswith("Payload-Oxum: "):
            octets, count = line.split(": ")[1].split(".")
            info[i] = f"Payload-Oxum: {int(octets) + size}.{int(count) + 1}"
    (bag / "bag-info.txt").write_text("\n".join(info) + "\n")
    tags = [p for p in sorted(bag.iterdir()) if p.is_file()
            and p.name != "tagmanifest-sha256.txt"]
    (bag / "tagmanifest-sha256.txt").write_text("".join(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in tags))


def test_a_sparse_terabyte_fails_in_seconds_without_unpacking(exported, tmp_path: Path) -> None:
    if shutil.which("tar") is None:
        pytest.skip("needs GNU tar for --sparse")
    root = tmp_path / "src"
    bag = root / exported.bag_dir.name
    shutil.copytree(exported.bag_dir, bag)
    with open(bag / "data" / "huge.bin", "wb") as handle:
        handle.truncate(1 << 40)  # 1 TiB, no block written
    _list_in_the_bag(bag, "data/huge.bin", 1 << 40)
    tar_path = tmp_path / "sparse.tar"
    made = subprocess.run(["tar", "--sparse", "-cf", str(tar_path), "-C", str(root), bag.name],
                          capture_output=True, text=True, timeout=60)
    if made.returncode != 0:
        pytest.skip(f"tar --sparse failed here: {made.stderr.strip()}")
    assert tar_path.stat().st_size < 50 * 2**20
    write_sha(tar_path)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    # Refused from the member's header, nothing unpacked (how fast: bench/, not here).
    done = verify(str(tar_path), "--no-reload", env={"TMPDIR": str(tmpdir)}, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "huge.bin: a sparse member declaring 1024.0 GiB" in done.stdout
    assert not list(tmpdir.iterdir())


def test_fifty_thousand_members_stop_at_the_member_limit(exported, tmp_path: Path) -> None:
    extra = [tarfile.TarInfo(f"{exported.bag_dir.name}/data/many/{i}") for i in range(50_000)]
    tar_path = tar_with(exported, tmp_path, extra)  # type: ignore[arg-type]
    done = verify(str(tar_path), "--no-reload")
    assert done.returncode == 1
    assert "more than 10,000 members (--max-members)" in done.stdout


def test_every_limit_is_a_flag(exported) -> None:
    done = verify(str(exported.tar_path), "--no-reload", "--max-members", "5")
    assert done.returncode == 1 and "more than 5 members (--max-members)" in done.stdout
    done = verify(str(exported.tar_path), "--no-reload", "--max-file-gib", "0.0000001")
    assert done.returncode == 1 and "per file (--max-file-gib)" in done.stdout
    done = verify(str(exported.tar_path), "--no-reload", "--max-total-gib", "0.0000001")
    assert done.returncode == 1 and "limit (--max-total-gib)" in done.stdout


def _bag_copy(exported, tmp_path: Path) -> Path:
    bag = tmp_path / exported.bag_dir.name
    shutil.copytree(exported.bag_dir, bag)
    return bag


@pytest.mark.timeout(60)
def test_a_fifo_in_a_bag_folder_fails_instead_of_hanging(exported, tmp_path: Path) -> None:
    bag = _bag_copy(exported, tmp_path)
    os.mkfifo(bag / "data" / "notes")
    done = verify(str(bag), "--no-reload", timeout=30)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "data/notes is a FIFO" in done.stdout


@pytest.mark.timeout(60)
def test_a_link_to_a_fifo_outside_the_bag_fails_instead_of_hanging(exported, tmp_path: Path
                                                                   ) -> None:
    bag = _bag_copy(exported, tmp_path)
    os.mkfifo(tmp_path / "outside.fifo")
    (bag / "data" / "manifest.json").unlink()
    (bag / "data" / "manifest.json").symlink_to(tmp_path / "outside.fifo")
    done = verify(str(bag), "--no-reload", timeout=30)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "data/manifest.json is a symbolic link to a FIFO" in done.stdout


@pytest.mark.parametrize("name", ["manifest.json", "reload.json"])
def test_a_deeply_nested_json_is_a_named_failure_not_a_crash(exported, tmp_path: Path,
                                                              name: str) -> None:
    bag = _bag_copy(exported, tmp_path)
    (bag / "data" / name).write_text("[" * 100_000 + "]" * 100_000)
    bagit.Bag(str(bag)).save(manifests=True)
    done = verify(str(bag), "--no-reload")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "internal error" not in done.stderr
    assert f"data/{name} is not valid JSON: nested deeper than 64 levels" in done.stdout


# ------------------------------------------------------------------ --rebuild

MALICIOUS = r'''
import json, os, subprocess, sys
OUT = __OUT__
with open(os.path.join(OUT, "env.json"), "w") as handle:
    json.dump(dict(os.environ), handle)
child = subprocess.Popen(["sleep", "300"], start_new_session=True)  # leaves the group
with open(os.path.join(OUT, "child.pid"), "w") as handle:
    handle.write(str(child.pid))
try:  # the old guard was one line away
    del sys.modules["cockpit"]
except KeyError:
    pass
try:
    import site
    site.main()
    import cockpit
    found = "importable"
except ImportError:
    found = "unimportable"
with open(os.path.join(OUT, "cockpit.txt"), "w") as handle:
    handle.write(found)
print(json.dumps({"ok": True, "missing_keys": [], "unexpected_keys": [], "parameters": 7,
                  "model": "fake:model"}))
print("run control: model fake:model() rebuilt")
sys.stdout.flush()

def load(run, report=None):
    raise RuntimeError("this bag rebuilds nothing")

if __name__ == "__main__":
    os._exit(0)
'''


def model_bag(exported, tmp_path: Path, script: str) -> Path:
    """A copy of the export whose accepted run ``control`` declares a model, with
    ``script`` as its reload.py, re-hashed (a valid bag: --rebuild runs it)."""
    bag = _bag_copy(exported, tmp_path)
    manifest = json.loads((bag / "data" / "manifest.json").read_text())
    manifest["runs"]["control"]["model"] = "m:build"
    (bag / "data" / "manifest.json").write_text(json.dumps(manifest))
    doc = json.loads((bag / "data" / "reload.json").read_text())
    for entry in doc["artifacts"]:
        if entry.get("run") == "control" and entry.get("chosen_for_result"):
            entry["model"] = "m:build"
    (bag / "data" / "reload.json").write_text(json.dumps(doc))
    (bag / "data" / "reload.py").write_text(script)
    bagit.Bag(str(bag)).save(manifests=True)
    return bag


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_rebuild_contains_a_malicious_reload_script(exported, tmp_path: Path) -> None:
    out = tmp_path / "seen"
    out.mkdir()
    bag = model_bag(exported, tmp_path, MALICIOUS.replace("__OUT__", repr(str(out))))
    done = verify(str(bag), "--no-reload", "--rebuild", "--json", timeout=180,
                  env={"COCKPIT_TEST_SECRET_TOKEN": "s3cret", "SSH_AUTH_SOCK": "/x/agent"})
    report = json.loads(done.stdout)
    rebuilt = next(c for c in report["checks"] if c["name"] == "model rebuilt")
    # The script printed a perfect answer and exited 0: not believed.
    assert not rebuilt["ok"], rebuilt
    assert "this bag rebuilds nothing" in " ".join(rebuilt["failures"])
    assert "runs the bag's own code" in done.stderr and "as you" in done.stderr
    env = json.loads((out / "env.json").read_text())
    assert "COCKPIT_TEST_SECRET_TOKEN" not in env and "SSH_AUTH_SOCK" not in env
    assert env["HOME"] != os.environ.get("HOME") and "cockpit-rebuild-" in env["HOME"]
    assert (out / "cockpit.txt").read_text() == "unimportable"
    child = int((out / "child.pid").read_text())
    try:
        assert _dead(child), "a detached child of reload.py outlived verify-export"
    finally:
        if not _dead(child):
            os.kill(child, signal.SIGKILL)


HONEST_SLOW = r'''
import os, time
OUT = __OUT__

def load(run, report=None):
    open(os.path.join(OUT, "started"), "w").close()
    time.sleep(120)

if __name__ == "__main__":
    load(None)
'''


@pytest.mark.slow
def test_sigterm_during_a_tar_verify_leaves_no_temporary_folder(exported, tmp_path: Path
                                                                 ) -> None:
    out = tmp_path / "seen"
    out.mkdir()
    bag = model_bag(exported, tmp_path / "b", HONEST_SLOW.replace("__OUT__", repr(str(out))))
    tar_path = tmp_path / "slow.tar"
    with tarfile.open(tar_path, "w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(bag, arcname=bag.name)
    write_sha(tar_path)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "verify-export", str(tar_path),
                             "--no-reload", "--rebuild"],
                            env=dict(os.environ, TMPDIR=str(tmpdir)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    def started() -> bool:
        assert proc.poll() is None, proc.communicate()
        return (out / "started").exists()

    try:
        wait_for(started, timeout=90, what="the rebuild to start")
        assert any(p.name.startswith("cockpit-verify-tar-") for p in tmpdir.iterdir())
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "internal error" not in err and "Traceback" not in err
    assert not [p.name for p in tmpdir.iterdir() if p.name.startswith("cockpit-")]


def test_printed_verify_commands_never_run_the_bags_code(exported) -> None:
    commands = fetch_commands(exported.tar_path)
    assert any("cockpit verify-export" in c for c in commands)
    assert not any("--rebuild" in c for c in commands)
    assert "--rebuild" not in (exported.root / "FETCH.txt").read_text()
    assert "--rebuild" not in exported.summary()
    assert "--rebuild" not in (exported.bag_dir / "data" / "RELOAD.md").read_text()
