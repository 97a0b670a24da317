"""An S3-compatible server (moto) on loopback, for tests of recovery directories on S3.

Tests import the `s3_folder` fixture: an empty `s3://` folder of a fresh
bucket, with the standard AWS environment variables pointing at the server.
"""

from __future__ import annotations

import uuid
from typing import Iterator

import boto3
import pytest
from moto.server import ThreadedMotoServer

from support.ports import free_port


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server that lives as long as the test module."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3_folder(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """`s3://BUCKET/recovery` in a new bucket; the AWS variables name the server and its test credentials."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_S3": s3_endpoint,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    bucket = f"flowspark-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return f"s3://{bucket}/recovery"
