"""When is a git push request complete? Reading git's receive-pack wire format.

A push over the git protocol (git://, also the body of smart HTTP) is:

1. the service request, one pkt-line: `git-receive-pack /repo.git\\0host=...\\0`
   (git:// only); the server answers with its ref advertisement;
2. the command list: pkt-lines `<old> <new> <ref>` (the first carries
   capabilities after a NUL), ended by a flush-pkt `0000`;
3. if the client and server agreed on `push-options`: option pkt-lines and
   another flush-pkt;
4. unless every command deletes a ref: the packfile, `PACK`, version, object
   count, the objects (each a type/size header, a delta base for delta
   objects, then one zlib stream), and a 20-byte SHA-1 trailer over all of it.

The request is complete when the pack's trailer has arrived and matches the
SHA-1 of the pack bytes: only then has the server everything it needs to
apply the push. Anything shorter is partial; bad framing is invalid.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass, field

ZERO_ID = "0" * 40
SHA1_LEN = 20
PACK_VERSIONS = (2, 3)
OBJ_OFS_DELTA = 6
OBJ_REF_DELTA = 7
PLAIN_TYPES = (1, 2, 3, 4)


class InvalidRequest(ValueError):
    """The bytes cannot be a receive-pack request."""


@dataclass
class PushRequest:
    """What has arrived so far of one receive-pack request."""

    state: str = "partial"  # partial | complete | invalid
    commands: list[str] = field(default_factory=list)
    pack_objects: int | None = None
    pack_bytes: int | None = None
    error: str | None = None


def read_pkt_line(buf: bytes, pos: int) -> tuple[bytes | None, int] | None:
    """(payload, next position); payload None is a flush-pkt; None if more bytes are needed."""
    if len(buf) < pos + 4:
        return None
    head = buf[pos : pos + 4]
    try:
        length = int(head, 16)
    except ValueError as error:
        raise InvalidRequest(f"bad pkt-line length {head!r}") from error
    if length == 0:
        return None, pos + 4
    if length < 4:
        raise InvalidRequest(f"unexpected special pkt-line {head!r} in a v0 push")
    if len(buf) < pos + length:
        return None
    return buf[pos + 4 : pos + length], pos + length


def read_section(buf: bytes, pos: int) -> tuple[list[bytes], int] | None:
    """pkt-line payloads up to the next flush-pkt, and the position after it; None if cut short."""
    lines: list[bytes] = []
    while True:
        read = read_pkt_line(buf, pos)
        if read is None:
            return None
        payload, pos = read
        if payload is None:
            return lines, pos
        lines.append(payload)


def service_request(buf: bytes) -> tuple[str, int] | None:
    """The git:// service line (`git-receive-pack /x.git`) and where the rest starts."""
    read = read_pkt_line(buf, 0)
    if read is None:
        return None
    payload, pos = read
    if payload is None:
        raise InvalidRequest("flush-pkt where the service request belongs")
    return payload.split(b"\0", 1)[0].decode("utf-8", errors="replace").strip(), pos


def _varint_end(buf: bytes, pos: int) -> int | None:
    while True:
        if pos >= len(buf):
            return None
        byte = buf[pos]
        pos += 1
        if not byte & 0x80:
            return pos


def pack_end(buf: bytes, start: int) -> tuple[int, int] | None:
    """(end offset, object count) of a complete packfile at `start`; None if partial."""
    if len(buf) < start + 12:
        if not b"PACK".startswith(buf[start : start + 4]):
            raise InvalidRequest("expected a packfile after the command list")
        return None
    if buf[start : start + 4] != b"PACK":
        raise InvalidRequest("expected a packfile after the command list")
    version = int.from_bytes(buf[start + 4 : start + 8], "big")
    if version not in PACK_VERSIONS:
        raise InvalidRequest(f"unsupported pack version {version}")
    count = int.from_bytes(buf[start + 8 : start + 12], "big")
    pos = start + 12
    for _ in range(count):
        if pos >= len(buf):
            return None
        kind = (buf[pos] >> 4) & 7
        end = _varint_end(buf, pos)
        if end is None:
            return None
        pos = end
        if kind == OBJ_OFS_DELTA:
            end = _varint_end(buf, pos)
            if end is None:
                return None
            pos = end
        elif kind == OBJ_REF_DELTA:
            pos += SHA1_LEN
        elif kind not in PLAIN_TYPES:
            raise InvalidRequest(f"bad pack object type {kind}")
        if pos >= len(buf):
            return None
        end = _zlib_end(buf, pos)
        if end is None:
            return None
        pos = end
    if len(buf) < pos + SHA1_LEN:
        return None
    if hashlib.sha1(buf[start:pos]).digest() != buf[pos : pos + SHA1_LEN]:
        raise InvalidRequest("pack trailer does not match its SHA-1")
    return pos + SHA1_LEN, count


def _zlib_end(buf: bytes, pos: int) -> int | None:
    """End offset of the zlib stream starting at `pos`; None if it is cut short."""
    stream = zlib.decompressobj()
    try:
        for offset in range(pos, len(buf), 65536):
            chunk = buf[offset : offset + 65536]
            stream.decompress(chunk)
            if stream.eof:
                return offset + len(chunk) - len(stream.unused_data)
    except zlib.error as error:
        raise InvalidRequest(f"corrupt pack object: {error}") from error
    return None


def parse_push(body: bytes) -> PushRequest:
    """Classify the client's bytes after the service request (the push itself)."""
    request = PushRequest()
    try:
        section = read_section(body, 0)
        if section is None:
            return request
        lines, pos = section
        for payload in lines:
            request.commands.append(payload.partition(b"\0")[0].decode("utf-8", errors="replace").strip())
        if not request.commands:
            request.state = "complete"  # nothing to update: a flush alone
            return request
        if b"push-options" in lines[0].partition(b"\0")[2].split():
            options = read_section(body, pos)
            if options is None:
                return request
            pos = options[1]
        if all(command.split(" ")[1:2] == [ZERO_ID] for command in request.commands):
            request.state = "complete"
            return request
        found = pack_end(body, pos)
        if found is None:
            return request
        end, request.pack_objects = found
        request.pack_bytes = end - pos
        request.state = "complete"
        return request
    except InvalidRequest as error:
        request.state = "invalid"
        request.error = str(error)
        return request
