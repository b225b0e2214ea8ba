"""Zips the peer as a team would deploy it to Lambda's Python runtime: the handler, and
Powertools with what it needs beyond the runtime (boto3, botocore, jmespath and their own
dependencies come with the runtime, so they stay out). Prints the zip's path.

    python package.py OUT.zip
"""

import sys
import sysconfig
import zipfile
from pathlib import Path

# What Lambda's Python runtime does not provide.
PACKAGES = ["aws_lambda_powertools", "typing_extensions.py"]


def main(out: Path):
    site = Path(sysconfig.get_paths()["purelib"])
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(Path(__file__).with_name("powertools_worker.py"), "powertools_worker.py")
        for name in PACKAGES:
            path = site / name
            files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
            for f in files:
                if "__pycache__" not in f.parts:
                    z.write(f, f.relative_to(site).as_posix())
    print(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
