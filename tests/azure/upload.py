"""Upload a local directory tree to an Azurite (Azure Blob emulator) container.

    python tests/azure/upload.py BLOB_URL CONTAINER PREFIX DIR

BLOB_URL is Azurite's blob endpoint, e.g. http://127.0.0.1:10000; the account
is Azurite's well-known development account. Creates the container if needed.
"""
import os
import sys

from azure.storage.blob import BlobServiceClient

# Azurite's published development account (not a secret).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def main() -> None:
    blob_url, container, prefix, root = sys.argv[1:5]
    service = BlobServiceClient(account_url=f"{blob_url.rstrip('/')}/{ACCOUNT}", credential={"account_name": ACCOUNT, "account_key": KEY})
    client = service.get_container_client(container)
    if not client.exists():
        client.create_container()
    count = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            key = prefix.rstrip("/") + "/" + os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, "rb") as f:
                client.upload_blob(key, f, overwrite=True)
            count += 1
    print(f"uploaded {count} blobs to az://{container}/{prefix}")


if __name__ == "__main__":
    main()
