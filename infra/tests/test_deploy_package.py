"""How infra/deploy_localstack.py packages a crate of one's own: which crates it builds
itself (any but this workspace's members), which binary it takes from cargo's messages,
and the zip it makes (no debug information, `bootstrap`, nothing half-written left)."""

import json
import os
import pathlib
import shutil
import sys
import tempfile
import unittest
import zipfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from deploy_localstack import ROOT, bundle, pick_executable, workspace_root  # noqa: E402


def artifact(name, manifest, executable, test=False, kind="bin"):
    return json.dumps({
        "reason": "compiler-artifact",
        "manifest_path": str(manifest),
        "target": {"name": name, "kind": [kind]},
        "profile": {"test": test},
        "executable": str(executable),
    })


class WhichCrate(unittest.TestCase):
    def test_a_member_of_this_workspace_is_packaged_as_the_tests_build_it(self):
        self.assertEqual(workspace_root(ROOT / "examples/starter"), ROOT)

    def test_a_crate_copied_inside_the_checkout_is_its_own_workspace(self):
        with tempfile.TemporaryDirectory(dir=ROOT / "target") as d:
            crate = pathlib.Path(d).resolve()
            (crate / "src").mkdir()
            (crate / "src/main.rs").write_text("fn main() {}\n")
            (crate / "Cargo.toml").write_text(
                '[package]\nname = "mine"\nversion = "0.1.0"\nedition = "2024"\n\n[workspace]\n'
            )
            self.assertEqual(workspace_root(crate), crate)


class WhichBinary(unittest.TestCase):
    def test_the_crates_own_binary_not_its_test_nor_a_namesake_of_another_package(self):
        crate = pathlib.Path("/w/mine")
        messages = [
            artifact("worker", crate / "Cargo.toml", "/w/target/debug/worker"),
            artifact("worker", crate / "Cargo.toml", "/w/target/debug/deps/worker-1", test=True),
            artifact("worker", "/w/other/Cargo.toml", "/w/target/debug/worker-other"),
            json.dumps({"reason": "build-finished", "success": True}),
        ]
        self.assertEqual(pick_executable(messages, crate, "worker"), pathlib.Path("/w/target/debug/worker"))
        self.assertIsNone(pick_executable(messages, crate, "starter"))


class TheZip(unittest.TestCase):
    def setUp(self):
        self.dir = pathlib.Path(tempfile.mkdtemp())
        self.binary = self.dir / "mine"
        shutil.copy(shutil.which("true"), self.binary)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_bootstrap_is_zipped_and_nothing_half_written_is_left(self):
        archive = bundle(self.binary, "mine")
        with zipfile.ZipFile(archive) as z:
            self.assertEqual(z.namelist(), ["bootstrap"])
        self.assertEqual(sorted(p.name for p in archive.parent.iterdir()), ["mine.zip"])

    def test_without_strip_it_says_so_in_one_line(self):
        path = os.environ["PATH"]
        os.environ["PATH"] = str(self.dir / "nothing-here")
        try:
            with self.assertRaises(SystemExit) as stop:
                bundle(self.binary, "mine")
        finally:
            os.environ["PATH"] = path
        self.assertIn("`strip` (GNU binutils) is not on PATH", str(stop.exception.code))


if __name__ == "__main__":
    unittest.main()
