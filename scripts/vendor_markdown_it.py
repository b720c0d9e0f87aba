"""Vendor markdown-it's browser build into gateway/http/static, checked against its record.

The chat page renders answers with markdown-it (SPEC 2a). Its single distributed browser
file is committed, so the page needs no network; this script is how that file got there
and how anyone checks it, through npm's own client (``npm pack``) from the npm registry:

    python scripts/vendor_markdown_it.py            # fetch the recorded version again,
                                                    # check it, (re)write the two files
    python scripts/vendor_markdown_it.py --version 15.1.0   # move to another version

The record, ``gateway/http/static/vendor.json``, holds the version, the licence, the tarball's
integrity (npm's sha512) and the sha256 of each vendored file. Fetching the recorded
version again must give the recorded tarball byte for byte, or the script stops and
changes nothing. ``tests/gateway/http/test_page.py`` checks the committed files against the
record without any network.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "gateway" / "static"
RECORD = STATIC / "vendor.json"
PACKAGE = "markdown-it"
#: Tarball member -> file name under gateway/static.
FILES = {
    "package/dist/browser/markdown-it.umd.min.js": "markdown-it.min.js",
    "package/LICENSE": "markdown-it.LICENSE.txt",
}


def integrity(data: bytes) -> str:
    """npm's Subresource-Integrity form of a tarball's sha512."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def pack(version: str, folder: Path) -> tuple[bytes, dict[str, object]]:
    """Download ``markdown-it@version`` with ``npm pack``; the tarball and npm's report."""
    out = subprocess.run(
        ["npm", "pack", f"{PACKAGE}@{version}", "--json", "--pack-destination", str(folder)],
        check=True,
        capture_output=True,
        text=True,
        cwd=folder,
    ).stdout
    report = json.loads(out)[0]
    return (folder / str(report["filename"])).read_bytes(), report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", help="move to this version (default: the recorded one)")
    args = parser.parse_args()
    record = json.loads(RECORD.read_text())
    entry = record[PACKAGE]
    version = args.version or entry["version"]
    with tempfile.TemporaryDirectory() as tmp:
        tarball, report = pack(version, Path(tmp))
        got = integrity(tarball)
        if got != report["integrity"]:
            print(f"npm reported {report['integrity']}, the tarball is {got}", file=sys.stderr)
            return 1
        if version == entry["version"] and got != entry["integrity"]:
            print(
                f"{PACKAGE}@{version} is not the recorded tarball: {got} != {entry['integrity']}",
                file=sys.stderr,
            )
            return 1
        try:
            contents = {name: tar_member(tarball, member) for member, name in FILES.items()}
            package = json.loads(tar_member(tarball, "package/package.json"))
        except KeyError as exc:
            print(f"{exc} is missing from the tarball", file=sys.stderr)
            return 1
    files = {name: hashlib.sha256(data).hexdigest() for name, data in contents.items()}
    if version == entry["version"] and entry.get("files") and files != entry["files"]:
        print(f"files differ from the record: {files} != {entry['files']}", file=sys.stderr)
        return 1
    for name, data in contents.items():
        (STATIC / name).write_bytes(data)
    record[PACKAGE] = {
        "version": version,
        "license": str(package.get("license", "")),
        "source": f"npm registry, {PACKAGE}@{version} via `npm pack`",
        "integrity": got,
        "files": files,
        "members": {name: member for member, name in FILES.items()},
    }
    RECORD.write_text(json.dumps(record, indent=2) + "\n")
    for name, digest in files.items():
        print(f"{name}  {len(contents[name])} bytes  sha256 {digest}")
    return 0


def tar_member(tarball: bytes, member: str) -> bytes:
    """One file of a gzipped tarball (read in memory: nothing is extracted to disk)."""
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        handle = tar.extractfile(member)
        if handle is None:
            raise KeyError(member)
        return handle.read()


if __name__ == "__main__":
    sys.exit(main())
