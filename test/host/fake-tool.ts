/**
 * Stand-ins for host tools that cannot run here (nvidia-smi without a GPU, systemctl without
 * systemd as PID 1): small shell scripts that replay a recorded real output from
 * `test/fixtures/host`, exit with the recorded status, record their argv, or hang. The providers
 * take the executable from an option, so the appliance runs them exactly as it would the real tool.
 *
 * @module
 */
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../helpers/fixtures.js';

/** Absolute path of a host fixture; throws a clear error when it is missing (tests never skip). */
export function hostFixture(relative: string): string {
  const file = path.join(ROOT, 'test', 'fixtures', 'host', relative);
  if (!existsSync(file)) throw new Error(`missing host fixture test/fixtures/host/${relative}`);
  return file;
}

export interface FakeTool {
  /** The script to pass as the tool's executable. */
  path: string;
  /** Every argv the tool was called with, one array per call. */
  calls(): Promise<string[][]>;
}

export interface FakeToolBehaviour {
  /** Fixture printed on stdout (relative to test/fixtures/host). */
  stdout?: string;
  /** Fixture printed on stderr. */
  stderr?: string;
  /** Literal text printed on stdout (garbage cases). */
  text?: string;
  /** Exit status. Defaults to 0. */
  exit?: number;
  /** Sleep this many seconds before answering (a hang). */
  sleep?: number;
  /**
   * Per-first-argument behaviour (systemctl show vs. restart): the key is matched against any
   * argument of the call.
   */
  byArg?: Record<string, Omit<FakeToolBehaviour, 'byArg'>>;
}

function quote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

function body(b: Omit<FakeToolBehaviour, 'byArg'>): string {
  const lines: string[] = [];
  if (b.sleep) lines.push(`sleep ${b.sleep}`);
  if (b.stdout) lines.push(`cat ${quote(hostFixture(b.stdout))}`);
  if (b.text !== undefined) lines.push(`printf '%s' ${quote(b.text)}`);
  if (b.stderr) lines.push(`cat ${quote(hostFixture(b.stderr))} >&2`);
  lines.push(`exit ${b.exit ?? 0}`);
  return lines.join('\n');
}

/** Writes a fake tool script into a fresh temp folder. */
export async function fakeTool(name: string, behaviour: FakeToolBehaviour): Promise<FakeTool> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-fake-'));
  const file = path.join(dir, name);
  const log = path.join(dir, 'calls.log');
  const parts = ['#!/bin/sh', `printf '%s\\037' "$@" >> ${quote(log)}; printf '\\n' >> ${quote(log)}`];
  for (const [arg, b] of Object.entries(behaviour.byArg ?? {})) {
    parts.push(`for a in "$@"; do if [ "$a" = ${quote(arg)} ]; then`, body(b), 'fi; done');
  }
  parts.push(body(behaviour));
  await writeFile(file, parts.join('\n') + '\n');
  await chmod(file, 0o755);
  return {
    path: file,
    async calls() {
      const text = await readFile(log, 'utf8').catch(() => '');
      return text
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split('\x1f').slice(0, -1));
    },
  };
}
