"""The ClickHouse HTTP interface in front of chDB: the newest ClickHouse for tests.

chDB (PyPI ``chdb-core``) is ClickHouse 26.9 built as a library, with no server.
This process opens one persistent chDB session on a data directory (tables survive
requests and restarts) and answers the part of ClickHouse's HTTP protocol that the
``clickhouse`` Rust crate (0.15) and curl use, so the report store connects to it
exactly as to a server. Every statement really runs in chDB; nothing is emulated
except the transport.

Protocol handled (see deploy/local/README.md):

* ``GET /`` and ``GET /ping`` answer ``Ok.``.
* ``POST /`` (or ``GET /?query=``): the query is the ``query`` URL parameter, the body,
  or the parameter followed by the body. ``INSERT ... FORMAT <fmt>`` in the parameter
  with the rows in the body is a streaming insert (``send_insert``) of those rows.
* URL parameters ``database`` (also the ``X-ClickHouse-Database`` header),
  ``default_format`` (also ``X-ClickHouse-Format``; TabSeparated otherwise),
  ``decompress=1`` (the body is in ClickHouse's compressed-block framing, LZ4 or
  none, as the crate sends inserts; CityHash128 checksums checked), ``query_id``
  (ignored). Any other parameter is refused with code 115: a server would apply it as
  a setting (or, ``compress=1``, frame its answer), and ignoring it would mislead.
* ``Accept-Encoding: lz4`` gets an LZ4-frame body with ``Content-Encoding: lz4``, as
  a 26.x server does (``enable_http_compression`` is on by default since 25.10).
* Errors: HTTP 500, ``X-ClickHouse-Exception-Code: N`` and the engine's text
  ``Code: N. DB::Exception: ...``.

Limits: one statement at a time (a lock around the session; chDB runs one at a time
anyway), whole bodies are held in memory, no users or passwords (listen on loopback
only), GET queries are not made read-only, no sessions, query parameters or
settings in the URL, no multipart bodies. chDB runs every INSERT synchronously,
whereas a 26.2+ server queues it (``async_insert`` is on by default there; with
``wait_for_async_insert=1`` the INSERT still returns once its data is in a part).

    python shim.py --data DIR [--host 127.0.0.1] [--port 8124]
"""

import argparse
import http.server
import json
import re
import struct
import sys
import threading
import urllib.parse

import chdb
import clickhouse_cityhash.cityhash as cityhash
import lz4.block
import lz4.frame
from chdb import session as chdb_session

# ClickHouse error codes the shim raises itself (names as in ClickHouse's ErrorCodes).
CANNOT_READ_ALL_DATA = 33
CHECKSUM_DOESNT_MATCH = 40
UNKNOWN_COMPRESSION_METHOD = 89
UNKNOWN_SETTING = 115
CANNOT_DECOMPRESS = 271
STD_EXCEPTION = 1001

# Compressed-block framing (Native protocol, HTTP `decompress=1`): a CityHash128
# checksum (16 bytes) of what follows, a method byte, the block's size with this
# 9-byte header and the size of the data uncompressed (little endian), the data.
METHOD_NONE = 0x02
METHOD_LZ4 = 0x82
BLOCK_HEADER = struct.Struct("<BII")
CHECKSUM_SIZE = 16

INSERT_WITH_DATA = re.compile(r"^\s*(INSERT\s+INTO\s.*?)\s+FORMAT\s+(\w+)\s*$", re.I | re.S)
CODE = re.compile(r"Code: (\d+)")
KNOWN_PARAMS = {"query", "database", "default_format", "decompress", "query_id"}


class ClickHouseError(Exception):
    """A failure answered as ClickHouse answers it: a code and its message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def checksum(block):
    """ClickHouse's block checksum: CityHash128 v1.0.2, high half first."""
    h = cityhash.CityHash128(block)
    return ((h & (2**64 - 1)) << 64 | h >> 64).to_bytes(16, "little")


def decompress_blocks(data):
    """The bytes framed in ClickHouse's compressed blocks, each checked."""
    out, pos = [], 0
    while pos < len(data):
        size = 0
        if len(data) - pos >= CHECKSUM_SIZE + BLOCK_HEADER.size:
            method, size, raw_size = BLOCK_HEADER.unpack_from(data, pos + CHECKSUM_SIZE)
        block = data[pos + CHECKSUM_SIZE : pos + CHECKSUM_SIZE + size]
        if size < BLOCK_HEADER.size or len(block) != size:
            raise ClickHouseError(
                CANNOT_READ_ALL_DATA,
                "DB::Exception: Truncated compressed block. (CANNOT_READ_ALL_DATA)",
            )
        if checksum(block) != data[pos : pos + CHECKSUM_SIZE]:
            raise ClickHouseError(
                CHECKSUM_DOESNT_MATCH,
                "DB::Exception: Checksum doesn't match: corrupted data. (CHECKSUM_DOESNT_MATCH)",
            )
        payload = block[BLOCK_HEADER.size :]
        if method == METHOD_LZ4:
            try:
                out.append(lz4.block.decompress(payload, uncompressed_size=raw_size))
            except lz4.block.LZ4BlockError as e:
                raise ClickHouseError(
                    CANNOT_DECOMPRESS, f"DB::Exception: LZ4: {e}. (CANNOT_DECOMPRESS)"
                ) from None
        elif method == METHOD_NONE:
            out.append(payload)
        else:
            raise ClickHouseError(
                UNKNOWN_COMPRESSION_METHOD,
                f"DB::Exception: Unknown compression method {method:#x} (the shim reads LZ4 "
                "and none). (UNKNOWN_COMPRESSION_METHOD)",
            )
        pos += CHECKSUM_SIZE + size
    return b"".join(out)


def quote_identifier(name):
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


class Engine:
    """One chDB session, one statement at a time."""

    def __init__(self, path):
        self.session = chdb_session.Session(path)
        self.lock = threading.Lock()
        version = self.session.query("SELECT version()", "TabSeparated")
        self.version = version.bytes().decode().strip()

    def run(self, sql, database, fmt, rows=None):
        """Runs `sql` in `database`; with `rows`, `sql` is `INSERT ... FORMAT fmt`
        and `rows` its data. Returns the answer's body and a summary."""
        with self.lock:
            try:
                self.session.query(f"USE {quote_identifier(database)}")
                if rows is None:
                    r = self.session.query(sql, fmt)
                    return r.bytes(), {"read_rows": r.rows_read(), "read_bytes": r.bytes_read()}
                insert = self.session.send_insert(sql, fmt)
                try:
                    insert.append(rows)
                    done = insert.finish()
                finally:
                    insert.cancel()  # no-op once finished
                return b"", {"written_rows": done.rows_written,
                             "written_bytes": done.bytes_written}
            except RuntimeError as e:  # chdb.ChdbError is one
                raise engine_error(str(e), self.version) from None


def engine_error(text, version):
    """A chDB exception as the server's error: `Code: N. DB::Exception: ...`."""
    m = CODE.search(text)
    if not m:
        return ClickHouseError(STD_EXCEPTION, f"DB::Exception: {text} (STD_EXCEPTION)")
    message = text[m.end() :].lstrip(". ").rstrip()
    if "(version " not in message:
        message += f" (version {version})"
    return ClickHouseError(int(m.group(1)), message)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the crate pools connections
    server_version = "chdb-shim"
    engine = None  # set by main()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        params = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        if url.path in ("/", "/ping") and "query" not in params:
            self.answer(200, b"Ok.\n", "text/plain; charset=UTF-8")
        elif url.path == "/":
            self.handle_query(params, b"")
        else:
            self.not_found()

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        body = self.read_body()
        if url.path != "/":
            self.not_found()
            return
        self.handle_query(urllib.parse.parse_qs(url.query, keep_blank_values=True), body)

    def handle_query(self, params, body):
        param = {k: v[-1] for k, v in params.items()}
        fmt = param.get("default_format") or self.headers.get("X-ClickHouse-Format")
        fmt = fmt or "TabSeparated"
        try:
            out, summary = self.execute(param, body, fmt)
        except Exception as e:  # every failure is an answer, as a server's would be
            if not isinstance(e, ClickHouseError):
                e = ClickHouseError(STD_EXCEPTION, f"DB::Exception: {e!r}. (STD_EXCEPTION)")
            query = param.get("query", body[:200])
            self.log_message("code %s: %s | %s", e.code, str(e)[:300], query)
            self.answer(500, f"Code: {e.code}. {e}\n".encode(), "text/plain; charset=UTF-8",
                        {"X-ClickHouse-Exception-Code": str(e.code)})
            return
        binary = not fmt.startswith("Tab")
        self.answer(200, out, "application/octet-stream" if binary else "text/plain; charset=UTF-8",
                    {"X-ClickHouse-Format": fmt, "X-ClickHouse-Summary": json.dumps(summary)})

    def execute(self, param, body, fmt):
        unknown = sorted(set(param) - KNOWN_PARAMS)
        if unknown:
            raise ClickHouseError(
                UNKNOWN_SETTING,
                "DB::Exception: The chdb shim does not apply URL settings or query parameters: "
                f"{', '.join(unknown)}. (UNKNOWN_SETTING)",
            )
        if param.get("decompress") == "1":
            body = decompress_blocks(body)
        database = param.get("database") or self.headers.get("X-ClickHouse-Database")
        database = database or "default"
        insert = INSERT_WITH_DATA.match(param.get("query", ""))
        if insert:
            return self.engine.run(insert.group(1), database, insert.group(2), body)
        sql = "\n".join(p for p in (param.get("query", ""), body.decode()) if p)
        return self.engine.run(sql, database, fmt)

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()  # the CRLF after each chunk
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def not_found(self):
        body = b"There is no handle " + self.path.encode() + b"\n"
        self.answer(404, body, "text/plain; charset=UTF-8")

    def answer(self, status, body, content_type, headers=None):
        if "lz4" in self.headers.get("Accept-Encoding", "").lower():
            body = lz4.frame.compress(body)
            headers = {**(headers or {}), "Content-Encoding": "lz4"}
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_request(self, code="-", size="-"):
        pass  # every request would be thousands of lines a test run; errors are logged


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="chDB data directory (created if missing)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8124)
    args = parser.parse_args()
    try:  # a process name `up.sh` can tell from any other python (Linux)
        with open("/proc/self/comm", "w") as comm:
            comm.write("chdb-shim")
    except OSError:
        pass
    Handler.engine = Engine(args.data)
    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"chdb-shim: chDB {chdb.__version__} (ClickHouse {Handler.engine.version}), "
          f"data {args.data}, listening on http://{args.host}:{args.port}",
          file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
