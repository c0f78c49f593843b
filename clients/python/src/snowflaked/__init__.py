"""Python client of snowflaked, a ZooKeeper-coordinated snowflake ID service.

Standard library only. ``Client`` asks the nodes for IDs over keep-alive
HTTP/1.1 connections, merging concurrent callers' requests into one
``GET /ids?count=N``, failing over between nodes::

    from snowflaked import Client

    with Client(nodes=["127.0.0.1:8081", "127.0.0.1:8082"]) as c:
        print(c.next_id(), c.next_ids(3), c.next_uuid())

See the package's README for the options, the errors and how each node
answer is handled.
"""

from .client import MAX_COUNT, MAX_TAG_LEN, Bounds, Client
from .encoding import ENCODINGS, EncodingError, decode_id, decode_uuid, encode_id, encode_uuid, encoded_width
from .errors import (
    ClosedError,
    DeadlineExceededError,
    InvalidConfigError,
    NoNodeError,
    NodeFailure,
    RejectedError,
    SnowflakedError,
)
from .layout import DEFAULT_EPOCH, Decoded, Layout

__version__ = "0.1.0"

__all__ = [
    "Bounds",
    "Client",
    "ClosedError",
    "DEFAULT_EPOCH",
    "DeadlineExceededError",
    "Decoded",
    "ENCODINGS",
    "EncodingError",
    "InvalidConfigError",
    "Layout",
    "MAX_COUNT",
    "MAX_TAG_LEN",
    "NoNodeError",
    "NodeFailure",
    "RejectedError",
    "SnowflakedError",
    "__version__",
    "decode_id",
    "decode_uuid",
    "encode_id",
    "encode_uuid",
    "encoded_width",
]
