"""Every store's options, stated once: a frozen msgspec Struct per store, checked once.

A store's constructor, its ``from_url``, its sync class and the config factories all take
the same keyword options and build one of these from them (``Options.of``), so an
option's name, default and check live in one place. A wrong value, or a name the store
does not have, is ``session.input.invalid`` before anything is built.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar, Union

import msgspec

from . import validate
from .budget import DEFAULT_TIMEOUT
from .errors import ErrorCode, SessionError
from .ids import validate_id
from .keys import DEFAULT_PREFIX
from .limits import DEFAULT_MAX_RECORD_BYTES, DEFAULT_TTL_SECONDS, MAX_BATCH_BYTES, MAX_ITEM_BYTES
from .replication import DEFAULT_ACK_TIMEOUT, MAX_REPLICA_ACKS


O = TypeVar("O", bound="Options")


class Options(msgspec.Struct, frozen=True, kw_only=True):
    """What every store has."""

    key_prefix: str = DEFAULT_PREFIX
    """Every key of the store starts with it (docs/key-layout.md)."""
    ttl_seconds: Union[float, None] = DEFAULT_TTL_SECONDS
    """How long what a write touches lives, renewed by every write (None: no expiry)."""
    sliding_ttl: bool = False
    """Reads renew the TTL too."""
    compression: bool = True
    """Values of ``codec.COMPRESS_MIN_BYTES`` or more are stored zstd-compressed where that
    makes them smaller."""
    timeout: Union[float, None] = DEFAULT_TIMEOUT
    """Seconds one call may take in total, retries included (None: no budget)."""
    replica_acks: int = 0
    """A write returns only once this many replicas have it (:mod:`.replication`)."""
    replica_ack_timeout: float = DEFAULT_ACK_TIMEOUT
    """How long a write waits for those replicas before ``session.backend.not_replicated``."""

    def __post_init__(self) -> None:
        validate_id(self.key_prefix, "key prefix")
        validate.ttl_ms(self.ttl_seconds)
        validate.flag(self.sliding_ttl, "sliding_ttl")
        validate.flag(self.compression, "compression")
        validate.seconds(self.timeout)
        validate.integer(self.replica_acks, "replica_acks", maximum=MAX_REPLICA_ACKS)
        if validate.seconds(self.replica_ack_timeout, "replica_ack_timeout") is None:
            raise SessionError(ErrorCode.INPUT_INVALID, "replica_ack_timeout must be a number of seconds above 0")

    @classmethod
    def of(cls: type[O], **given: Any) -> O:
        """The options ``given`` by name, checked; an unknown name is refused."""
        try:
            return cls(**given)
        except TypeError as exc:
            if isinstance(exc, SessionError):
                raise
            raise SessionError(ErrorCode.INPUT_INVALID, f"{cls.__name__}: {exc}") from None

    @property
    def ttl_ms(self) -> int:
        """The TTL in ms, as the scripts take it (0: none)."""
        return validate.ttl_ms(self.ttl_seconds)

    @property
    def slide_ms(self) -> int:
        """The TTL a read gives again, in ms (0: reads give none)."""
        return self.ttl_ms if self.sliding_ttl else 0


class ResponseOptions(Options, frozen=True, kw_only=True):
    """A response store's options."""

    max_depth: int = 64
    """The longest chain ``resolve_chain`` reads unless told otherwise."""
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    """The largest record a save takes, counted before compression."""
    replay_instructions: bool = False
    """``resolve_chain`` lists each turn's instructions as a system message."""
    response_expiry: bool = True
    """A thread this store starts keeps the books of per-response expiry: each response
    goes once no live response descends from it (threads stop growing); False: a thread
    expires whole."""

    def __post_init__(self) -> None:
        super().__post_init__()
        validate.integer(self.max_depth, "max_depth", minimum=1, maximum=MAX_DEPTH_LIMIT)
        validate.integer(self.max_record_bytes, "max_record_bytes", minimum=1024, maximum=MAX_RECORD_BYTES_LIMIT)
        validate.flag(self.replay_instructions, "replay_instructions")
        validate.flag(self.response_expiry, "response_expiry")


MAX_DEPTH_LIMIT = 100_000
MAX_RECORD_BYTES_LIMIT = 64 << 20


class ItemOptions(Options, frozen=True, kw_only=True):
    """What an item session and a conversation store have beside the common options."""

    max_item_bytes: int = MAX_ITEM_BYTES
    """The largest item a write takes, counted before compression."""
    max_batch_bytes: int = MAX_BATCH_BYTES
    """The most bytes one write's items take together, counted before compression."""

    def __post_init__(self) -> None:
        super().__post_init__()
        validate.integer(self.max_item_bytes, "max_item_bytes", minimum=1, maximum=64 << 20)
        validate.integer(self.max_batch_bytes, "max_batch_bytes", minimum=1, maximum=256 << 20)


class SessionOptions(ItemOptions, frozen=True, kw_only=True):
    """An item session's options (``RedisSession``)."""

    max_items: Union[int, None] = None
    """The most items the session may hold; None: any number, as the Agents SDK's sessions."""

    def __post_init__(self) -> None:
        super().__post_init__()
        validate.optional_integer(self.max_items, "max_items", minimum=1)


class Configured:
    """A store or session whose options (``self.options``, an :class:`Options` of
    ``OPTIONS``) read as its attributes too: ``store.ttl_seconds``, ``session.max_items``."""

    OPTIONS: ClassVar[type[Options]]

    def __getattr__(self, name: str) -> Any:
        if name in self.OPTIONS.__struct_fields__:
            return getattr(object.__getattribute__(self, "options"), name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

