#!/usr/bin/env python3
"""Play one episode against the server exactly as the stock OpenEnv Python client would.

The real client (openenv EnvClient, built on the `websockets` package) cannot be
installed here, so this script reproduces its wire behaviour with the standard
library only (reference/openenv-protocol.md):

* base_url "http://host:port" becomes "ws://host:port/ws" (https -> wss);
* reset(**kwargs) sends {"type": "reset", "data": kwargs};
* step(action) sends {"type": "step", "data": <action fields>};
* state() sends {"type": "state"};
* every call reads exactly one reply; an "error" reply raises
  RuntimeError("Server error: <message> (code: <code>)");
* results are read from data.observation, data.reward and data.done;
* close() sends {"type": "close"} and then closes the socket.

Usage: openenv_client_check.py BASE_URL [EPISODE_JSON]
EPISODE_JSON (optional): {"question_id", "tables", "gold_sql", "gold_answer"} to
play an oracle episode; without it the script plays a generic one (DESCRIBE the
first table, QUERY its row count, ANSWER that count).
Prints a JSON summary and exits 0 on success.
"""

import base64
import hashlib
import json
import os
import socket
import struct
import sys
from urllib.parse import urlparse

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE_BYTES = 1024 * 1024  # OpenEnv 0.2.1 clients cap frames at 1 MiB


class WebSocketClosed(Exception):
    def __init__(self, code, reason):
        super().__init__(f"connection closed ({code}) {reason}")
        self.code = code
        self.reason = reason


class MiniWebSocket:
    """A minimal RFC 6455 client: text frames, fragmentation, ping/pong, close."""

    def __init__(self, url, timeout_s=30.0):
        parsed = urlparse(url)
        if parsed.scheme != "ws":
            raise ValueError("only ws:// is supported by this check")
        self.sock = socket.create_connection((parsed.hostname, parsed.port or 80), timeout=timeout_s)
        self.buffer = b""
        key = base64.b64encode(os.urandom(16)).decode()
        path = parsed.path or "/"
        if parsed.query:
            path += "?" + parsed.query
        request = (
            f"GET {path} HTTP/1.1\r\n"
            f"Host: {parsed.hostname}:{parsed.port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        head = self._read_until(b"\r\n\r\n").decode("latin-1")
        status_line, *header_lines = head.split("\r\n")
        if " 101 " not in status_line + " ":
            raise ConnectionError(f"handshake refused: {status_line}")
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in header_lines if ":" in line)}
        expected = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != expected:
            raise ConnectionError("bad Sec-WebSocket-Accept")
        self.close_code = None

    def _read_exact(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise WebSocketClosed(1006, "socket closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _read_until(self, marker):
        while marker not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("socket closed during handshake")
            self.buffer += chunk
        index = self.buffer.index(marker) + len(marker)
        data, self.buffer = self.buffer[:index], self.buffer[index:]
        return data

    def _send_frame(self, opcode, payload):
        header = bytes([0x80 | opcode])
        length = len(payload)
        if length < 126:
            header += bytes([0x80 | length])
        elif length < 65536:
            header += bytes([0x80 | 126]) + struct.pack("!H", length)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", length)
        mask = os.urandom(4)  # clients must mask every frame
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send_text(self, text):
        self._send_frame(0x1, text.encode("utf-8"))

    def recv_text(self):
        message = b""
        while True:
            first, second = self._read_exact(2)
            fin, opcode = first & 0x80, first & 0x0F
            length = second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", self._read_exact(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", self._read_exact(8))
            if second & 0x80:
                raise ConnectionError("server frames must not be masked")
            payload = self._read_exact(length)
            if opcode == 0x8:  # close: answer it, then report
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                self.close_code = code
                try:
                    self._send_frame(0x8, payload[:2])
                except OSError:
                    pass
                raise WebSocketClosed(code, payload[2:].decode("utf-8", "replace"))
            if opcode == 0x9:  # ping
                self._send_frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            message += payload
            if len(message) > MAX_MESSAGE_BYTES:
                raise ConnectionError("message larger than 1 MiB")
            if fin:
                return message.decode("utf-8")

    def close(self, code=1000):
        try:
            self._send_frame(0x8, struct.pack("!H", code))
        except OSError:
            pass
        self.sock.close()


class StepResult:
    def __init__(self, observation, reward, done):
        self.observation = observation
        self.reward = reward
        self.done = done


class OpenEnvStyleClient:
    """What openenv's EnvClient does on the wire, call for call."""

    def __init__(self, base_url):
        url = base_url.rstrip("/")
        if url.startswith("https://"):
            url = "wss://" + url[len("https://"):]
        elif url.startswith("http://"):
            url = "ws://" + url[len("http://"):]
        self.ws = MiniWebSocket(url + "/ws")

    def _send_and_receive(self, message):
        self.ws.send_text(json.dumps(message))
        response = json.loads(self.ws.recv_text())
        if response.get("type") == "error":
            error = response.get("data", {})
            raise RuntimeError(f"Server error: {error.get('message', 'Unknown error')} (code: {error.get('code', 'UNKNOWN')})")
        return response

    @staticmethod
    def _parse_result(payload):
        return StepResult(payload.get("observation", {}), payload.get("reward"), payload.get("done", False))

    def reset(self, **kwargs):
        return self._parse_result(self._send_and_receive({"type": "reset", "data": kwargs})["data"])

    def step(self, action):
        return self._parse_result(self._send_and_receive({"type": "step", "data": action})["data"])

    def state(self):
        return self._send_and_receive({"type": "state"})["data"]

    def close(self):
        try:
            self.ws.send_text(json.dumps({"type": "close"}))
            self.ws.recv_text()  # the server answers a close request by closing
        except WebSocketClosed:
            pass
        finally:
            self.ws.close()
        return self.ws.close_code


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    base_url = sys.argv[1]
    episode = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
    client = OpenEnvStyleClient(base_url)
    rewards = []

    reset_kwargs = {"question_id": episode["question_id"]} if episode else {"seed": 0}
    result = client.reset(**reset_kwargs)
    check(result.reward is None and result.done is False, "reset must return reward None, done False")
    obs = result.observation
    check("metadata" not in obs and "reward" not in obs, "observation must not carry metadata or reward")
    tables = episode["tables"] if episode else [line[2:].split(" ")[0] for line in obs["schema_info"].splitlines() if line.startswith("- ")]
    check(len(tables) > 0, "no table names in schema_info")

    result = client.step({"action_type": "DESCRIBE", "argument": tables[0]})
    check(result.observation["error"] == "", f"DESCRIBE failed: {result.observation['error']}")
    rewards.append(result.reward)

    # An invalid action raises like the stock client, and the session stays usable.
    try:
        client.step({"action_type": "QUERY", "argument": "SELECT 1", "unexpected": True})
        raise AssertionError("an unknown action field must be rejected")
    except RuntimeError as error:
        check("(code: VALIDATION_ERROR)" in str(error), f"unexpected error text: {error}")

    sql = episode["gold_sql"] if episode else f'SELECT COUNT(*) FROM "{tables[0]}"'
    result = client.step({"action_type": "QUERY", "argument": sql})
    check(result.observation["error"] == "", f"QUERY failed: {result.observation['error']}")
    rewards.append(result.reward)

    answer = episode["gold_answer"] if episode else result.observation["result"].splitlines()[1]
    result = client.step({"action_type": "ANSWER", "argument": answer})
    check(result.done is True, "ANSWER must end the episode")
    rewards.append(result.reward)

    state = client.state()
    check(state["step_count"] == 3 and state["done"] is True, f"unexpected state {state}")
    close_code = client.close()
    summary = {"ok": True, "rewards": rewards, "total_reward": sum(rewards), "state": state, "close_code": close_code}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
