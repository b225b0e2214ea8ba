"""How infra/deploy_localstack.py hands CloudFormation a template: inline up to its 51,200
bytes, through S3 (the artifacts bucket, keyed by content) beyond, as `sam deploy` does."""

import pathlib
import sys
import types
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from deploy_localstack import BUCKET, INLINE_LIMIT, template_source  # noqa: E402


class RecordingS3:
    """Keeps what is put; has the bucket already."""

    def __init__(self):
        self.meta = types.SimpleNamespace(endpoint_url="http://127.0.0.1:4566/")
        self.objects = {}

    def head_bucket(self, Bucket):
        assert Bucket == BUCKET

    def put_object(self, Bucket, Key, Body):
        self.objects[(Bucket, Key)] = Body


class TemplateSource(unittest.TestCase):
    def test_a_template_that_fits_goes_inline_and_nothing_is_uploaded(self):
        s3 = RecordingS3()
        body = "x" * INLINE_LIMIT
        self.assertEqual(template_source(s3, body), {"TemplateBody": body})
        self.assertEqual(s3.objects, {})

    def test_a_larger_template_is_uploaded_and_named_by_its_url(self):
        s3 = RecordingS3()
        body = "Resources: {}\n" + "#" * INLINE_LIMIT
        source = template_source(s3, body)
        [(bucket, key)] = s3.objects
        self.assertEqual(s3.objects[(bucket, key)], body.encode())
        self.assertEqual(source, {"TemplateURL": f"http://127.0.0.1:4566/{BUCKET}/{key}"})
        # The same template, the same key: an unchanged deploy uploads nothing new.
        self.assertEqual(template_source(RecordingS3(), body), source)


if __name__ == "__main__":
    unittest.main()
