"""The review's network and process helpers (scripts/review-under-cap.py): HTTP as an attacker
writes it, /proc samples, hostile RTSP servers on 127.0.0.1 (every connection bounded in time,
at most 256), and a case's record. Python 3 standard library only."""

import json
import os
import re
import socket
import threading
import time

HEALTHY = "testsrc width=64 height=48 live=true num-buffers=1000000 ! boxes format=synthetic"
HEALTHY_ID = 1

# ---------------------------------------------------------------- HTTP, as an attacker writes it


class Reply:
    def __init__(self, status, head, body):
        self.status, self.head, self.body = status, head, body

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def error(self):
        j = self.json()
        return j.get("error", "") if isinstance(j, dict) else self.body[:300]

    def header(self, name):
        for line in self.head.split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == name.lower():
                return v.strip()
        return None


def exchange(sock, request, limit):
    """Send `request` on `sock`, read until the server closes (at most `limit` s)."""
    sock.settimeout(limit)
    deadline = time.monotonic() + limit
    try:
        sock.sendall(request)
    except OSError:
        pass  # a server refusing part-way answers and closes: read what it said
    data = bytearray()
    try:
        while time.monotonic() < deadline and len(data) < 64 << 20:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    finally:
        sock.close()
    text = data.decode("utf-8", "replace")
    head, sep, body = text.partition("\r\n\r\n")
    parts = head.split()
    if not sep or len(parts) < 2 or not parts[1].isdigit():
        return None
    return Reply(int(parts[1]), head, body)


def raw(addr, request, limit=10.0, source=None):
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if source:
            sock.bind((source, 0))
        sock.settimeout(limit)
        sock.connect(addr)
    except OSError:
        return None
    return exchange(sock, request, limit)


def request(addr, method, path, body=b"", limit=10.0):
    if isinstance(body, str):
        body = body.encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: {addr[0]}:{addr[1]}\r\n"
    if body:
        head += "Content-Type: application/json\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return raw(addr, head.encode() + body, limit)


# ---------------------------------------------------------------- /proc

def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "Threads"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    try:
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        out["fds"] = 0
    return out


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- hostile servers on 127.0.0.1


class HostileRtsp:
    """An RTSP server whose `answer(conn, cseq, method, deadline)` answers each request until it
    returns False; every connection ends within `limit` s, at most 256 connections."""

    def __init__(self, answer, limit):
        self.answer, self.limit = answer, limit
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self.conns = 0
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped.is_set() and self.conns < 256:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()
        self.sock.close()

    def _serve(self, conn):
        deadline = time.monotonic() + self.limit
        conn.settimeout(0.2)
        head = b""
        try:
            while not self.stopped.is_set() and time.monotonic() < deadline:
                try:
                    chunk = conn.recv(4096)
                except socket.timeout:
                    continue
                if not chunk:
                    return
                head += chunk
                end = head.find(b"\r\n\r\n")
                if end < 0:
                    if len(head) > 65536:
                        return
                    continue
                text, head = head[:end].decode("latin-1"), head[end + 4:]
                method = (text.split() or [""])[0]
                m = re.search(r"(?im)^CSeq:\s*(\S+)", text)
                conn.settimeout(1.0)
                if not self.answer(conn, m.group(1) if m else "1", method, deadline, self.stopped):
                    return
                conn.settimeout(0.2)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stopped.set()
        self.thread.join(5)


def rtsp_options(conn, cseq):
    conn.sendall(f"RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\n"
                 "Public: OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN\r\n\r\n".encode())
    return True


def endless_sdp(conn, cseq, method, deadline, stopped):
    """DESCRIBE: Content-Length 1500000000 and m= lines without end, as fast as read."""
    if method == "OPTIONS":
        return rtsp_options(conn, cseq)
    conn.sendall((f"RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\nContent-Type: application/sdp\r\n"
                  "Content-Length: 1500000000\r\n\r\nv=0\r\no=- 0 0 IN IP4 127.0.0.1\r\n"
                  "s=x\r\nt=0 0\r\n").encode())
    media = b"m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\n" * 100
    while time.monotonic() < deadline and not stopped.is_set():
        try:
            conn.send(media)
        except socket.timeout:
            continue
    return False


def many_media(conn, cseq, method, deadline, stopped):
    """DESCRIBE: an SDP of 1000 media sections within a small Content-Length."""
    if method == "OPTIONS":
        return rtsp_options(conn, cseq)
    sdp = "m=video 0 RTP/AVP 96\r\n" * 1000
    conn.sendall((f"RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\nContent-Type: application/sdp\r\n"
                  f"Content-Length: {len(sdp)}\r\n\r\n{sdp}").encode())
    return True


def drip(conn, cseq, method, deadline, stopped):
    """Every request: a status line, then one byte of a header a second, without end."""
    conn.sendall(f"RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\nX-Pad: ".encode())
    while time.monotonic() < deadline and not stopped.is_set():
        conn.sendall(b"a")
        stopped.wait(1.0)
    return False


# ---------------------------------------------------------------- a case

class Case:
    def __init__(self, name):
        self.name, self.outcome, self.reason, self.ok, self.notes = name, "?", "", True, []

    def fail(self, why):
        self.ok = False
        self.notes.append(why)

    def expect(self, cond, why):
        if not cond:
            self.fail(why)
        return cond


def short(text, n=90):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."
