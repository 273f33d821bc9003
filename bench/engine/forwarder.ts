/**
 * The least a Node.js front end can do in front of llama-server, for bench/engine/front-cost.ts:
 * a plain-HTTP server that reads each request's body, sends it to the same path upstream on a new
 * connection (llama-server closes its connection after every streamed answer), and passes the
 * answer's head and chunks through as they arrive. No TLS, no key, no parsing, no scheduling.
 * `node:http` on both sides: undici as the upstream client put 0.4-0.8 ms more on the first
 * token on the 2-core development machine.
 *
 * Run: `node --import tsx bench/engine/forwarder.ts <listen port> <upstream port>`; prints
 * `ready` once it listens.
 *
 * @module
 */
import http from 'node:http';

const [listen, upstream] = process.argv.slice(2).map(Number);
if (!listen || !upstream) throw new Error('usage: forwarder.ts <listen port> <upstream port>');

const server = http.createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    const body = Buffer.concat(parts);
    const out = http.request(
      {
        host: '127.0.0.1',
        port: upstream,
        method: req.method,
        path: req.url,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
        agent: false,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, { 'content-type': answer.headers['content-type'] ?? 'text/event-stream' });
        answer.on('data', (c: Buffer) => res.write(c));
        answer.on('end', () => res.end());
      },
    );
    out.on('error', (err) => res.destroy(err));
    out.end(body);
  });
});
server.listen(listen, '127.0.0.1', () => console.log('ready'));
