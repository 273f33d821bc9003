/**
 * The host-tool runner every provider uses: output and exit status, a missing tool, a deadline
 * that kills the whole process group (a wrapper script's `sleep` included) and settles on time,
 * an output cap, cancellation.
 */
import t from 'tap';
import { runTool, ToolError } from './run-tool.js';

t.test('output, stderr and exit status; arguments are not interpreted by a shell', async (t) => {
  const r = await runTool('/bin/sh', ['-c', 'echo out "$1"; echo err >&2; exit 3', 'sh', '$(touch /tmp/never); *']);
  t.same(r, { code: 3, stdout: 'out $(touch /tmp/never); *\n', stderr: 'err\n' });
});

t.test('a missing tool is a ToolError "missing"', async (t) => {
  const err = await runTool('/nonexistent/nvidia-smi', []).catch((e: unknown) => e);
  t.ok(err instanceof ToolError && err.reason === 'missing', 'rejects as missing');
  t.match((err as Error).message, /is not installed/);
});

t.test('a hung tool is killed with its children at the deadline', async (t) => {
  const started = Date.now();
  const err = await runTool('/bin/sh', ['-c', 'sleep 30 & sleep 30; echo late'], { timeoutMs: 300 }).catch((e: unknown) => e);
  t.ok(err instanceof ToolError && err.reason === 'timeout', 'rejects with a timeout');
  t.ok(Date.now() - started < 5000, 'settles at the deadline although a grandchild held the pipes');
});

t.test('output beyond the cap is refused', async (t) => {
  const err = await runTool('/bin/sh', ['-c', 'head -c 100000 /dev/zero'], { maxBytes: 1000 }).catch((e: unknown) => e);
  t.ok(err instanceof ToolError && err.reason === 'overflow', 'rejects with an overflow');
});

t.test('an abort signal stops the tool', async (t) => {
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 100);
  const err = await runTool('/bin/sh', ['-c', 'sleep 30'], { signal: controller.signal }).catch((e: unknown) => e);
  t.ok(err instanceof ToolError && err.reason === 'aborted', 'rejects as aborted');
});
