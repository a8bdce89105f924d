"""The daemon's asyncio client: one connection, many requests in flight, replies matched by id.

    client = await Client.connect(config, launch=launch_daemon)   # start a daemon if none answers
    reply = await client.complete(protocol.Complete(id=new_request_id(), document=uri, text=text, cursor=i))

An Error reply raises DaemonError. If the connection drops, every pending call raises
ConnectionError (connect again). Cancelling the task that awaits `complete` sends the
daemon a Cancel for it. Importing this module does not import torch. The launcher is passed in
(`specd.daemon.lifecycle.launch_daemon`, which itself connects through this client): a coroutine
awaited in the caller's loop.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable

import msgspec

from specd.daemon import protocol
from specd.daemon.config import Config
from specd.daemon.paths import Paths, SetupError, read_token
from specd.decoding.errors import UserError

log = logging.getLogger("specd.client")
_ids = itertools.count(1)
HANDSHAKE_TIMEOUT_S = 10.0   # a daemon answers at once (its model work is on another thread)
# Starts a daemon for the config, giving up after the timeout (s), e.g. lifecycle.launch_daemon.
Launcher = Callable[[Config, float], Awaitable[object]]


def new_request_id() -> int:
    """A request id unique in this process."""
    return next(_ids)


class DaemonError(UserError):
    """The daemon answered a request with an Error."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


class NotRunning(ConnectionError, UserError):
    """No daemon answers where the config says it listens (or, given a launcher, none could start)."""


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, welcome: protocol.Welcome):
        self.welcome = welcome
        self._reader, self._writer = reader, writer
        self._pending: dict[int, asyncio.Future] = {}
        self._lost: ConnectionError | None = None
        self._replies = asyncio.create_task(self._read_replies(), name="specd-client-replies")

    @classmethod
    async def connect(cls, config: Config, launch: Launcher | None = None, timeout: float = 120.0) -> Client:
        """Connect to the daemon (its Unix socket, else its loopback TCP port when configured).
        If none answers and `launch` is given, start one with it and wait for it."""
        try:
            return await asyncio.wait_for(cls._open(config), timeout)
        except ConnectionError:
            if launch is None:
                raise
        try:
            await launch(config, timeout)
        except UserError as error:
            raise NotRunning(f"cannot start the specd daemon: {error}") from None
        return await asyncio.wait_for(cls._open(config), timeout)

    @classmethod
    async def _open(cls, config: Config) -> Client:
        paths = Paths.of(config)
        try:
            reader, writer = await asyncio.open_unix_connection(paths.socket)
            token = ""
        except OSError as error:
            if not config.daemon.tcp_port:
                raise NotRunning(f"no specd daemon answers at {paths.socket} ({error.strerror or error}); "
                                 "start one with `specd start`") from None
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", config.daemon.tcp_port)
            except OSError as tcp_error:
                raise NotRunning(f"no specd daemon answers at {paths.socket} or on 127.0.0.1:"
                                 f"{config.daemon.tcp_port} ({tcp_error.strerror or tcp_error})") from None
            try:
                token = read_token(paths.token, make=False)
            except SetupError as token_error:
                writer.close()
                raise NotRunning(str(token_error)) from None
        try:
            return await asyncio.wait_for(cls.handshake(reader, writer, token, config.daemon.max_frame_bytes),
                                          HANDSHAKE_TIMEOUT_S)
        except TimeoutError:
            writer.close()
            raise NotRunning(f"something listens at {writer.get_extra_info('peername') or paths.socket} "
                             "but does not answer the handshake") from None

    @classmethod
    async def handshake(cls, reader, writer, token: str, max_frame_bytes: int) -> Client:
        writer.write(protocol.pack(protocol.Hello(protocol.VERSION, "specd-client", token)))
        try:
            reply = protocol.decode_reply(await protocol.read_frame(reader, max_frame_bytes))
        except (asyncio.IncompleteReadError, ConnectionError, protocol.FrameTooLarge, msgspec.DecodeError) as error:
            writer.close()
            raise NotRunning(f"no specd daemon answered the handshake ({error})") from None
        if isinstance(reply, protocol.Error):
            writer.close()
            raise DaemonError(reply.code, reply.message)
        assert isinstance(reply, protocol.Welcome), f"a handshake is answered by welcome, not {reply!r}"
        return cls(reader, writer, reply)

    async def complete(self, request: protocol.Complete) -> protocol.CompletionReply:
        try:
            return await self._request(request)
        except asyncio.CancelledError:
            if not self._lost and not self._writer.is_closing():
                self._writer.write(protocol.pack(protocol.Cancel(request.id)))
            raise

    async def cancel(self, request_id: int) -> None:
        """Ask the daemon to cancel a request; its `complete` call returns "cancelled"."""
        await self._send(protocol.Cancel(request_id))

    async def feedback(self, event: protocol.Feedback) -> None:
        """Tell the daemon what the user did with a suggestion (a notice: nothing comes back)."""
        await self._send(event)

    async def status(self) -> protocol.Status:
        return await self._request(protocol.GetStatus(new_request_id()))

    async def shutdown(self) -> protocol.ShuttingDown:
        return await self._request(protocol.Shutdown(new_request_id()))

    @property
    def lost(self) -> bool:
        """The connection is known to be gone: a request sent now would not reach the daemon."""
        return self._lost is not None

    async def close(self) -> None:
        """Close the connection; calls still pending raise ConnectionError (the daemon cancels them)."""
        self._writer.close()
        self._replies.cancel()
        try:
            await self._writer.wait_closed()
        except ConnectionError:
            pass

    async def _request(self, message):
        assert message.id not in self._pending, f"request id {message.id} is already in flight"
        future = asyncio.get_running_loop().create_future()
        self._pending[message.id] = future
        try:
            await self._send(message)
            reply = await future
        finally:
            self._pending.pop(message.id, None)
        if isinstance(reply, protocol.Error):
            raise DaemonError(reply.code, reply.message)
        return reply

    async def _send(self, message: protocol.Message) -> None:
        if self._lost:
            raise self._lost
        frame = protocol.pack(message)
        if len(frame) - protocol.HEADER.size > self.welcome.max_frame_bytes:
            # The daemon would skip it unread and could not say which request its error answers.
            raise DaemonError("frame_too_large", f"a request of {len(frame):,} bytes is over the daemon's "
                              f"limit of {self.welcome.max_frame_bytes:,} (daemon.max_frame_bytes)")
        self._writer.write(frame)
        await self._writer.drain()

    async def _read_replies(self) -> None:
        try:
            while True:
                body = await protocol.read_frame(self._reader, self.welcome.max_frame_bytes)
                reply = protocol.decode_reply(body)
                future = self._pending.get(getattr(reply, "id", None))
                if future is not None and not future.done():
                    future.set_result(reply)
                elif isinstance(reply, protocol.Error):
                    log.warning("the daemon says %s: %s", reply.code, reply.message)
        except (asyncio.IncompleteReadError, ConnectionError, protocol.FrameTooLarge) as error:
            self._lost = ConnectionError(f"the connection to the daemon was lost ({error or 'closed'})")
        except asyncio.CancelledError:
            self._lost = ConnectionError("the connection to the daemon was closed")
        except Exception as error:  # a reply this client cannot read: the connection is unusable
            self._lost = ConnectionError(f"cannot read the daemon's reply: {error}")
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._lost)
