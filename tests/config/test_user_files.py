"""The files and terminals users really have (issue 27, item 15).

Each case is what another tool writes or another YAML reader accepts. What ccpo-lab does
is checked against the readers used beside it: PyYAML (YAML 1.1, as Hydra/OmegaConf read
their configs) and ruamel.yaml (YAML 1.2). Where they agree, ccpo-lab reads the file as
they do; where they disagree on a plain value, it refuses the value, naming both readings
and how to write it; encodings follow the YAML spec's detection.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ccpo_lab.config.yamlio import read_yaml_mapping
from ccpo_lab.errors import UserError
from ccpo_lab.textout import prepare_streams, spell
from tests.conftest import REPO

SWEEP = "name: s\narms: [grpo]\nseeds: [0, 1]\n"


def _ruamel(text: str, version: tuple[int, int] | None = None) -> Any:
    from ruamel.yaml import YAML

    reader = YAML(typ="safe", pure=True)
    if version is not None:
        reader.version = version
    return reader.load(text)


def _read(tmp_path: Path, data: bytes) -> dict[str, Any]:
    p = tmp_path / "s.yaml"
    p.write_bytes(data)
    return read_yaml_mapping(p, "sweep file")


def _refused(tmp_path: Path, data: bytes) -> str:
    with pytest.raises(UserError) as e:
        _read(tmp_path, data)
    return str(e.value)


# ----------------------------------------------------------------- encodings
@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-be-bom", "utf-16-le",
                                      "utf-16-be", "utf-32", "crlf"])
def test_encodings_other_tools_write_are_read(tmp_path: Path, encoding: str) -> None:
    """UTF-8 with a byte-order mark (Notepad, Excel), UTF-16 with one (Windows PowerShell
    5's ``>``, Notepad's "Unicode"), UTF-16 without one and UTF-32 (detected from their NUL
    bytes, as the YAML spec says), CRLF line ends."""
    text = SWEEP + "description: café Δ\n"
    data = {"utf-16-be-bom": b"\xfe\xff" + text.encode("utf-16-be"),
            "crlf": text.replace("\n", "\r\n").encode()}.get(encoding) or text.encode(encoding)
    assert _read(tmp_path, data) == yaml.safe_load(text)


def test_latin1_bytes_are_refused_naming_line_and_column(tmp_path: Path) -> None:
    text = _refused(tmp_path, SWEEP.encode() + b"description: caf\xe9\n")
    assert text.endswith("s.yaml: sweep file is not UTF-8 text (byte b'\\xe9' at line 4, "
                         "column 17: Latin-1 or Windows-1252?); save it as UTF-8")
    # PyYAML and ruamel.yaml refuse it too
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(SWEEP.encode() + b"description: caf\xe9\n")


# --------------------------------------------------- values the YAML versions disagree on
AMBIGUOUS = [
    ("yes", True, "yes", "'yes' is the boolean true to YAML 1.1 readers (PyYAML, Hydra) and "
                         "text to YAML 1.2 readers (ruamel.yaml): write true, or quote it "
                         "('yes') for the text"),
    ("Off", False, "Off", "'Off' is the boolean false"),
    ("on", True, "on", "write true, or quote it ('on')"),
    ("NO", False, "NO", "write false, or quote it ('NO')"),
    ("010", 8, 10, "'010' is octal 8 to YAML 1.1 readers (PyYAML, Hydra) and 10 to YAML 1.2 "
                   "readers (ruamel.yaml): write it without the leading zero"),
    ("1:30:00", 5400, "1:30:00", "'1:30:00' is the number 5400 (base 60) to YAML 1.1 readers "
                                 "(PyYAML, Hydra) and text to YAML 1.2 readers (ruamel.yaml): "
                                 "quote it ('1:30:00') for the text, or write 5400"),
]


@pytest.mark.parametrize(("plain", "yaml11", "yaml12", "says"), AMBIGUOUS,
                         ids=[a[0] for a in AMBIGUOUS])
def test_a_value_yaml_11_and_12_read_differently_is_refused(
        tmp_path: Path, plain: str, yaml11: Any, yaml12: Any, says: str) -> None:
    from omegaconf import OmegaConf

    doc = f"v: {plain}\n"
    assert yaml.safe_load(doc)["v"] == yaml11 == _ruamel(doc, (1, 1))["v"]
    assert OmegaConf.to_container(OmegaConf.create(doc)) == {"v": yaml11}  # Hydra's reading
    assert _ruamel(doc)["v"] == yaml12 != yaml11
    text = _refused(tmp_path, (SWEEP + f"launcher: {{kind: slurm, sbatch_extra: {{x: {plain}"
                               "}}\n").encode())
    assert "s.yaml: line 4, column " in text and says in text, text
    # quoted, it is the text to every reader
    assert _read(tmp_path, (SWEEP + f"description: '{plain}'\n").encode())["description"] \
        == plain


AGREED = [
    "flags: [true, True, TRUE, false, False, FALSE]\n",   # YAML 1.2 booleans: all agree
    "words: [y, n, Y, N, yes please, 'no', \"off\"]\n",   # text to every reader
    "ints: [0, 7, -3, 1_000, 0x1f]\nfloats: [1.5, -0.25, 1.0e-6, .inf]\n",
    "nulls: [~, null, ]\nwhen: '2026-12-01'\n",
    "base: &b {lr: 0.1, steps: [1, 2]}\nmerged: {<<: *b, lr: 0.2}\nagain: *b\n",
    "---\nexplicit: [document, start, and, end]\n...\n",
    'quoted: "a\tb"\n',                                      # a tab inside quotes
]


@pytest.mark.parametrize("doc", AGREED, ids=["booleans", "words", "numbers", "nulls",
                                             "anchors-and-merge-keys", "document-markers",
                                             "tab-in-quotes"])
def test_what_every_reader_reads_alike_is_read_alike(tmp_path: Path, doc: str) -> None:
    ours = _read(tmp_path, doc.encode())
    assert ours == yaml.safe_load(doc) == _ruamel(doc)


def test_1e_minus_6_is_a_number_as_in_yaml_12_and_omegaconf(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    doc = "lr: 1e-6\n"
    assert _read(tmp_path, doc.encode()) == {"lr": 1e-6} == _ruamel(doc)
    assert OmegaConf.to_container(OmegaConf.create(doc)) == {"lr": 1e-6}
    assert yaml.safe_load(doc) == {"lr": "1e-6"}  # PyYAML alone reads text


def test_a_key_given_twice_is_refused_as_ruamel_and_omegaconf_refuse_it(
        tmp_path: Path) -> None:
    from omegaconf import OmegaConf
    from ruamel.yaml.constructor import DuplicateKeyError

    doc = "a: 1\na: 2\n"
    assert yaml.safe_load(doc) == {"a": 2}          # PyYAML alone keeps the last
    with pytest.raises(DuplicateKeyError):
        _ruamel(doc)
    with pytest.raises(yaml.YAMLError):
        OmegaConf.create(doc)
    assert "duplicate key 'a' at line 2 (first at line 1)" in _refused(tmp_path, doc.encode())


def test_merge_keys_merge_and_duplicates_stay_refused(tmp_path: Path) -> None:
    doc = (SWEEP + "x-base: &p {lr: 0.01, total_steps: 4}\n").replace("x-base", "protocol")
    ok = doc + "analysis:\n  <<: {window_start: 2, alpha: 0.1}\n  alpha: 0.05\n"
    assert _read(tmp_path, ok.encode())["analysis"] == {"window_start": 2, "alpha": 0.05}
    text = _refused(tmp_path, (ok + "seeds: [3]\n").encode())
    assert "duplicate key 'seeds' at line 8 (first at line 3)" in text
    twice = SWEEP + "analysis:\n  <<: {alpha: 0.1}\n  <<: {alpha: 0.2}\n"
    assert "duplicate key '<<' at line 6 (first at line 5)" in _refused(tmp_path, twice.encode())


def test_a_merged_sweep_file_launches_like_the_written_out_one(workdir: Path) -> None:
    from ccpo_lab.config.sweep import load_sweep

    merged = workdir / "sweeps" / "merged.yaml"
    merged.write_text(SWEEP.replace("name: s", "name: m") +
                      "protocol:\n  <<: {total_steps: 6, lr: 0.01}\n  lr: 0.02\n")
    plain = workdir / "sweeps" / "plain.yaml"
    plain.write_text(SWEEP.replace("name: s", "name: m") +
                     "protocol: {total_steps: 6, lr: 0.02}\n")
    assert [r.run_id for r in load_sweep(merged).runs] == \
        [r.run_id for r in load_sweep(plain).runs]


# ------------------------------------------------------------ layout and documents
def test_tabs_multiple_documents_and_pasted_spaces_are_named(tmp_path: Path) -> None:
    text = _refused(tmp_path, (SWEEP + "protocol:\n\tlr: 0.1\n").encode())
    assert "malformed YAML at line 5, column 1: found character '\\t' that cannot start " \
           "any token (YAML indents with spaces, never tabs)" in text
    text = _refused(tmp_path, (SWEEP + "---\nname: t\n").encode())
    assert "sweep file holds more than one YAML document (the second starts at line 4, " \
           "column 1); it must be one: remove that '---' or split the file" in text
    text = _refused(tmp_path, (SWEEP + "protocol:\n\u00a0 lr: 0.1\n").encode())
    assert "line 5: key '\\xa0 lr' holds a non-breaking or zero-width space" in text


# ------------------------------------------------------------------ terminals
def test_spellings() -> None:
    assert spell("Δ ≥ 0.5 — café ± 1… α") == "d >= 0.5 - cafe +/- 1... alpha"
    assert spell("数") == "?"


def test_a_stream_that_cannot_encode_the_text_writes_its_ascii_spelling() -> None:
    import io

    raw = io.BytesIO()
    latin = io.TextIOWrapper(raw, encoding="latin-1")
    prepare_streams((latin,))
    latin.write("café Δ ≥ 1\n")
    latin.flush()
    assert raw.getvalue() == "café d >= 1\n".encode("latin-1")
    raw = io.BytesIO()
    ascii_ = io.TextIOWrapper(raw, encoding="ascii")
    prepare_streams((ascii_,))            # as Python and click do: UTF-8
    ascii_.write("Δ\n")
    ascii_.flush()
    assert raw.getvalue() == "Δ\n".encode()
    raw = io.BytesIO()
    strict = io.TextIOWrapper(raw, encoding="utf-8", errors="strict")
    prepare_streams((strict,))            # a file name's bytes, as they are
    strict.write(os.fsdecode(b"caf\xe9") + "\n")
    strict.flush()
    assert raw.getvalue() == b"caf\xe9\n"


def _cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80", **env}
    return subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", *args], cwd=cwd,
                          capture_output=True, timeout=120, env=full, text=True,
                          encoding="utf-8", errors="replace")


@pytest.mark.slow
@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "latin-1"},
                                 {"PYTHONIOENCODING": "cp1252"},
                                 {"PYTHONIOENCODING": "ascii"},
                                 {"LANG": "C", "LC_ALL": "C"}],
                         ids=["latin-1", "cp1252", "ascii", "C-locale"])
def test_commands_print_unicode_to_a_terminal_that_is_not_utf8(
        workdir: Path, tmp_path: Path, env: dict[str, str]) -> None:
    from tests.report.builders import demo_like_study

    (workdir / "arms" / "uni.yaml").write_text(
        'name: uni\ndescription: "café Δ ≥ — an arm"\nestimator:\n  name: grpo\n',
        encoding="utf-8")
    study = demo_like_study(tmp_path, tmp_path / "results")
    for args in (["arms", "list"], ["report", str(study)], ["status", str(study)],
                 ["sweep", str(workdir / "sweeps" / "smoke.yaml"), "arms=[uni,grpo]",
                  "--dry-run", "--results", str(tmp_path / "r")]):
        proc = _cli(args, workdir, **env)
        assert proc.returncode == 0, (args, proc.stderr[-1500:])
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
        assert proc.stdout.strip(), args


def test_a_path_that_is_not_utf8_is_printed_without_a_crash(workdir: Path) -> None:
    """A directory named in Latin-1 bytes (an old archive unpacked on Linux): Python hands
    it over with surrogate escapes; a UTF-8 terminal whose errors are strict (a UTF-8
    locale other than C.UTF-8) failed printing it; its bytes are printed as they are."""
    name = os.fsdecode(b"caf\xe9")
    sweep = workdir / "sweeps" / f"{name}.yaml"
    sweep.write_bytes((workdir / "sweeps" / "smoke.yaml").read_bytes())
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "utf-8:strict"}
    proc = subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", "sweep", str(sweep),
                           "--dry-run", "--results", str(workdir / name)], cwd=workdir,
                          capture_output=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-800:]
    assert os.fsencode(str(workdir / name / "smoke")) in proc.stdout
    assert "nowhere-\\udce9.yaml: sweep file not found; valid: a file, or a shipped " \
        "example" in main_error(workdir, os.fsdecode(b"nowhere-\xe9.yaml"))


def main_error(workdir: Path, name: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "utf-8:strict"}
    proc = subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", "sweep",
                           str(workdir / name), "--dry-run"], cwd=workdir, capture_output=True,
                          timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr
    return proc.stderr.decode("utf-8", "backslashreplace").strip()
