/**
 * Socket reads for plain-HTTP registry connections: larger reads than Node's, and a tap that lets
 * a blob download take a response body straight off the socket into its own memory.
 *
 * @module
 */
import http, { type IncomingMessage } from 'node:http';
import net from 'node:net';

/**
 * Socket reads start at this size, as Node's own reads do; after a read of at least this much (a
 * body is streaming) the next one gets `LARGE_READ`.
 */
const SMALL_READ = 64 * 1024;
/** The size of socket reads while a body streams. */
const LARGE_READ = 1024 * 1024;

/**
 * Receives the bytes of a tapped response body (see {@link tapBody}) instead of the HTTP parser.
 * Both methods run inside the socket's read callback and must not throw.
 */
export interface BodyTap {
  /** Memory for the next socket read, or null for the connection's own buffer. Asked after every read. */
  region(): Uint8Array | null;
  /**
   * `n` bytes arrived at the start of `buf`: the last region, or the connection's own buffer
   * (valid only during this call). Returns false to stop reading until {@link TappedBody.resume}.
   */
  received(buf: Uint8Array, n: number): boolean;
}

/** The connection of a tapped body. */
export interface TappedBody {
  /** Reads again after {@link BodyTap.received} returned false. */
  resume(): void;
  /** Closes the connection: its HTTP parser never saw the body, so it cannot serve another request. */
  close(): void;
}

/** What each connection of a {@link LargeReadAgent} reads with. */
interface Reader {
  tap: BodyTap | null;
}

const readers = new WeakMap<net.Socket, Reader>();

/**
 * Plain-HTTP connections that read up to 1 MiB at a time instead of Node's fixed 64 KiB. A blob
 * download is CPU-bound on a small machine, and per read the HTTP client pays a parse, a buffer
 * and an event: a blob in about a tenth as many reads costs about half as much to receive
 * (bench/results/2026-11-27-code-notes.md). The read size follows the
 * last read: small while answers are small, large while a body streams. The bytes go to the HTTP
 * client through the socket's 'data' event, which is how it reads a socket, unless a tap takes them.
 *
 * Each connection reads into the same two buffers over and over: Node's HTTP parser copies every
 * body chunk out of the bytes it is given (and headers into strings) before it returns, so
 * nothing keeps a reference to a read buffer (the client tests hold chunks across reads and would
 * see them change otherwise). TLS sockets cannot read this way (their reads are 16 KiB records),
 * so HTTPS keeps Node's agent.
 */
export class LargeReadAgent extends http.Agent {
  override createConnection(options: net.NetConnectOpts): net.Socket {
    const small = Buffer.allocUnsafeSlow(SMALL_READ);
    let large: Buffer | undefined;
    let next: Buffer = small;
    const reader: Reader = { tap: null };
    const socket: net.Socket = net.createConnection({
      ...options,
      onread: {
        buffer: () => reader.tap?.region() ?? next,
        callback: (n: number, buf: Uint8Array) => {
          if (reader.tap) return reader.tap.received(buf, n);
          next = n >= SMALL_READ ? (large ??= Buffer.allocUnsafeSlow(LARGE_READ)) : small;
          socket.emit('data', Buffer.from(buf.buffer, buf.byteOffset, n));
          return true;
        },
      },
    } as net.NetConnectOpts);
    readers.set(socket, reader);
    return socket;
  }
}

/**
 * Takes the rest of `body` off its socket: from now on every byte the connection reads goes to
 * `tap`, in the memory it chooses, and never through the HTTP parser (which copies each chunk
 * into a new buffer and emits it as an event). What the parser already has is returned in
 * `parsed`, to be taken before anything the tap receives, and `rest` says how many bytes of the
 * body are still to come. The tap gets raw socket bytes, so it counts them itself (whatever
 * follows `rest` is not the body): only a `Content-Length` body can be tapped (not a chunked
 * one), and only on a {@link LargeReadAgent} connection. Returns null when it cannot be tapped.
 */
export function tapBody(body: IncomingMessage, tap: BodyTap): { parsed: Buffer[]; rest: number; tapped: TappedBody } | null {
  const socket = body.socket;
  const reader = socket ? readers.get(socket) : undefined;
  if (!socket || !reader || reader.tap || body.complete || body.destroyed) return null;
  const length = Number(body.headers['content-length']);
  if (body.headers['transfer-encoding'] !== undefined || !Number.isSafeInteger(length) || length < 0) return null;
  // Paused-mode reads return everything the stream holds; the socket's next read comes later,
  // on an I/O turn, after the tap is in place.
  const parsed: Buffer[] = [];
  for (let chunk: Buffer | null; (chunk = body.read() as Buffer | null) !== null;) parsed.push(chunk);
  reader.tap = tap;
  return {
    parsed,
    rest: length - parsed.reduce((n, c) => n + c.length, 0),
    tapped: {
      resume: () => {
        if (reader.tap === tap && !socket.destroyed) socket.resume();
      },
      close: () => {
        if (reader.tap === tap) reader.tap = null;
        socket.destroy();
      },
    },
  };
}
