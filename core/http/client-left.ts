/**
 * Whether the client closed the connection before its answer was complete. A client that goes
 * away (a closed tab, a cancelled `curl`, a chat UI's stop button) is ordinary: the work it asked
 * for is aborted and the log says so in one info line, not as a failure with a stack.
 *
 * @module
 */
import type { ServerResponse } from 'node:http';

export function clientLeft(res: ServerResponse): boolean {
  return res.destroyed && !res.writableFinished;
}
