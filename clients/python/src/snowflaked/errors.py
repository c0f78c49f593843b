"""The errors a :class:`snowflaked.Client` raises.

Every error derives from :class:`SnowflakedError`. Branch on the subclasses:

* :class:`RejectedError`: a node (or the client, before asking one) refused
  the request with an answer every node would give (a 4xx such as
  ``unknown_tag``, ``gene_off``, ``token_required``); never retried.
* :class:`NoNodeError`: no node could serve the call; ``causes`` holds each
  node's failure.
* :class:`DeadlineExceededError`: the caller's own ``timeout=`` passed first.
  It is also a builtin :class:`TimeoutError`.
* :class:`ClosedError`: the client was closed.
* :class:`InvalidConfigError`: a bad argument to the constructor (also a
  :class:`ValueError`).
"""

from __future__ import annotations

from typing import List, Optional, Sequence


class SnowflakedError(Exception):
    """The base class of every error the client raises."""


class InvalidConfigError(SnowflakedError, ValueError):
    """The client's configuration is invalid (raised by the constructor)."""


class ClosedError(SnowflakedError):
    """The client was closed: calls waiting or made after ``close()`` fail with it."""

    def __init__(self, message: str = "client closed") -> None:
        super().__init__(message)


class DeadlineExceededError(SnowflakedError, TimeoutError):
    """The caller's deadline (``timeout=``) passed before the call was served.

    A subclass of the builtin :class:`TimeoutError`. ``last_failure`` is the
    last node failure seen meanwhile, if any.
    """

    def __init__(self, message: str, last_failure: Optional[BaseException] = None) -> None:
        super().__init__(message)
        self.last_failure = last_failure


class RejectedError(SnowflakedError):
    """A request refused whichever node gets it; never retried.

    Attributes:
        node: the node that answered (``host:port``); ``""`` when the client
            refused the call itself before asking any node.
        status: the node's HTTP status; 0 when the client refused it.
        code: the API's error code (``unknown_tag``, ``invalid_count``,
            ``gene_off``, ``token_required``, ...); ``""`` when the answer
            had none.
        message: what is wrong, for people.
        max: with ``invalid_count``, the largest count the node accepts,
            when it names one; else ``None``.
        tag_max: with ``invalid_count``, a segment tag's per-request
            ceiling (``--max-count``), when the node names one; else ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        node: str = "",
        status: int = 0,
        code: str = "",
        max: Optional[int] = None,  # noqa: A002 - the API's field name
        tag_max: Optional[int] = None,
    ) -> None:
        self.node = node
        self.status = status
        self.code = code
        self.message = message
        self.max = max
        self.tag_max = tag_max
        text = "request rejected by snowflaked: "
        if node:
            text += f"{node}: {status} "
        if code:
            text += f"{code}: "
        super().__init__(text + message)


class NodeFailure(SnowflakedError):
    """One node's failure to serve a request (a cause inside :class:`NoNodeError`).

    Attributes:
        node: the node, ``host:port``.
        status: the HTTP status of its answer, 0 when none came.
        code: the API's error code of its answer, ``""`` when none.
        timeout: whether the failure was a timeout.
    """

    def __init__(self, node: str, message: str, *, status: int = 0, code: str = "", timeout: bool = False) -> None:
        super().__init__(f"{node}: {message}")
        self.node = node
        self.status = status
        self.code = code
        self.timeout = timeout


class NoNodeError(SnowflakedError):
    """No node could serve the call.

    Attributes:
        what: what the call asked for (``"IDs"``, ``"dense IDs of orders"``,
            ``"the cluster's node list"``).
        causes: each node's failure (:class:`NodeFailure` or another
            exception), this call's first, then why other nodes are down.
        not_tried: the nodes known that were neither asked nor down.
    """

    def __init__(self, what: str, causes: Sequence[BaseException], not_tried: Sequence[str] = ()) -> None:
        self.what = what
        self.causes: List[BaseException] = list(causes)
        self.not_tried: List[str] = list(not_tried)
        parts = [str(c) for c in self.causes] + [f"{n}: not tried" for n in self.not_tried]
        if not parts:
            parts = ["no node is known (the node list is empty)"]
        super().__init__(f"no snowflaked node available for {what}: " + "; ".join(parts))
