"""Upload a local directory tree to s3://BUCKET/PREFIX on an S3-compatible endpoint.

    python tests/s3/upload.py ENDPOINT BUCKET PREFIX DIR

Creates the bucket if needed. Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
"""
import os
import sys

import boto3


def main() -> None:
    endpoint, bucket, prefix, root = sys.argv[1:5]
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION", "us-east-1"))
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        s3.create_bucket(Bucket=bucket)
    count = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            key = prefix.rstrip("/") + "/" + os.path.relpath(path, root).replace(os.sep, "/")
            s3.upload_file(path, bucket, key)
            count += 1
    print(f"uploaded {count} objects to s3://{bucket}/{prefix}")


if __name__ == "__main__":
    main()
