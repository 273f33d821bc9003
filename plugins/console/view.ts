/**
 * The device console's screen, an Ink (React for terminals) component tree written with
 * `createElement`, so it builds with the project's plain-TypeScript esbuild step. It owns no I/O:
 * the command gives it a loader for {@link Snapshot}s and the actions, so the screen can be
 * driven by a test renderer as well as by a terminal.
 *
 * Keys: `r` rotate the master key (after a `y` confirmation; the new key is shown once), `s`
 * restart a service (chosen by number), `h` change the host name, `k` show the key file's path,
 * `q` quit. Any key dismisses a notice, Esc cancels a prompt.
 *
 * @module
 */
import { createElement as h, useCallback, useEffect, useRef, useState, type ReactElement } from 'react';
import { Box, Text, useApp, useInput, useStdout, type Key } from 'ink';
import type { SystemStatus } from 'lia/host-services';
import { caDownloadUrl, clip, formatSize, formatUptime, groupFingerprint } from './format.js';
import type { Snapshot } from './snapshot.js';

/** What the screen can ask of the appliance. Each resolves with a line to show, or throws. */
export interface ConsoleActions {
  /** Rotates the master key; resolves with the new key. */
  rotateKey(): Promise<string>;
  restartService(name: string): Promise<string>;
  setHostname(name: string): Promise<string>;
}

export interface ConsoleProps {
  load: () => Promise<Snapshot>;
  actions: ConsoleActions;
  /** The root CA's SHA-256 fingerprint, read from the data directory; null when unreadable. */
  fingerprint: string | null;
  /** Where the master key file is. */
  keyFile: string;
  /** Renders a QR code of a URL as text (block characters). */
  qr: (url: string) => Promise<string>;
  /** Milliseconds between refreshes. */
  intervalMs: number;
}

/** Terminal width from which the QR code is drawn beside the rest. */
export const QR_MIN_COLUMNS = 110;

type Mode = { kind: 'main' } | { kind: 'confirm-rotate' } | { kind: 'choose-service' } | { kind: 'hostname'; text: string };
interface Notice {
  text: string;
  tone: 'info' | 'error' | 'secret';
}

function useTerminalSize(): { columns: number; rows: number } {
  const { stdout } = useStdout();
  const read = (): { columns: number; rows: number } => ({ columns: stdout.columns || 80, rows: stdout.rows || 24 });
  const [size, setSize] = useState(read);
  useEffect(() => {
    const onResize = (): void => setSize(read());
    stdout.on('resize', onResize);
    return () => void stdout.off('resize', onResize);
  }, [stdout]);
  return size;
}

const STATE_COLOR: Record<string, string> = { active: 'green', activating: 'yellow', deactivating: 'yellow', inactive: 'gray', failed: 'red' };

function Section(props: { title: string; children?: ReactElement | ReactElement[] | null }): ReactElement {
  return h(Box, { flexDirection: 'column', marginTop: 1 }, h(Text, { bold: true, color: 'cyan' }, props.title), props.children ?? null);
}

function line(text: string, key?: string | number, extra: Record<string, unknown> = {}): ReactElement {
  return h(Text, { key, wrap: 'truncate-end', ...extra }, text);
}

/**
 * The status figures as the screen shows them (uptime to the minute, whole percentages), for the
 * body and for {@link screenKey} alike, so the two cannot drift apart.
 */
function statusText(s: SystemStatus): { version: string; resources: string } {
  return {
    version: `${s.version}   up ${formatUptime(s.uptime_seconds)}`,
    resources: `CPU ${Math.round(s.cpu_percent)}%   Memory ${Math.round(s.memory.used_percent)}% of ${s.memory.total_gb} GB   Model disk ${s.disk.models.used} used, ${s.disk.models.free} free`,
  };
}

function Body(props: { snap: Snapshot | null; fingerprint: string | null; width: number; loadError: string | null }): ReactElement {
  const { snap, width } = props;
  const s = snap?.status;
  const urls = snap?.network?.urls ?? [];
  const host = s?.hostname ?? snap?.network?.hostname ?? '…';
  const services = snap?.services ?? null;
  const models = snap?.models ?? null;
  const gpu = snap?.gpu;
  const fp = props.fingerprint ? groupFingerprint(props.fingerprint) : null;
  return h(
    Box,
    { flexDirection: 'column', width },
    h(Text, { bold: true }, clip(`LIA — Local Inference Appliance   Host name: ${host}${s ? `   ${statusText(s).version}` : ''}`, width)),
    props.loadError ? line(`Cannot reach the appliance: ${props.loadError}`, undefined, { color: 'red' }) : null,
    h(Section, { title: 'URLs' }, urls.length > 0 ? urls.map((u, i) => line(`  ${u}`, i)) : [line(snap ? '  (none the certificate covers)' : '  …', 0)]),
    h(
      Section,
      { title: 'CA fingerprint (SHA-256): compare with the certificate your browser downloads' },
      fp ? fp.map((l, i) => line(`  ${l}`, i, { bold: true })) : [line('  (the CA certificate cannot be read)', 0, { color: 'red' })],
    ),
    h(
      Section,
      { title: 'Services' },
      services
        ? h(
            Box,
            { flexDirection: 'row', flexWrap: 'wrap' },
            ...services.map((sv) =>
              h(Box, { key: sv.name, width: 26 }, h(Text, null, `${sv.name.padEnd(16)} `), h(Text, { color: STATE_COLOR[sv.state] ?? 'white' }, sv.state)),
            ),
          )
        : line(`  unavailable${snap?.errors['services'] ? `: ${snap.errors['services']}` : ''}`),
    ),
    h(
      Section,
      { title: 'Loaded models' },
      models === null
        ? line(`  unavailable${snap?.errors['models'] ? `: ${snap.errors['models']}` : ''}`)
        : models.length === 0
          ? line('  none')
          : models
              .slice(0, 4)
              .map((m, i) =>
                line(
                  `  ${m.name}  ${formatSize(m.size)}${m.size_vram > 0 ? ` (${formatSize(m.size_vram)} on ${m.device && m.device !== 'gpu' ? m.device : 'GPU'})` : ''}`,
                  i,
                ),
              ),
    ),
    h(
      Section,
      { title: 'Resources' },
      line(s ? `  ${statusText(s).resources}` : '  …'),
      line(
        gpu
          ? gpu.devices.length === 0
            ? `  GPU none${gpu.error ? ` (${gpu.error})` : ''}`
            : `  GPU ${gpu.devices.map((d) => `${d.name} ${d.vram_used_mb}/${d.vram_total_mb} MB${d.temp_c === null ? '' : ` ${d.temp_c} °C`}`).join(', ')}`
          : '  GPU unavailable',
      ),
    ),
    h(
      Section,
      { title: 'Recent warnings' },
      snap && snap.warnings.length > 0
        ? snap.warnings.map((w, i) => line(`  ${w.timestamp.slice(11, 19)} ${w.service}: ${w.message}`, i, { color: 'yellow' }))
        : [line('  none', 0)],
    ),
  );
}

/**
 * What of a snapshot reaches the screen, as a string: two snapshots with the same key draw the
 * same body. A refresh whose key is unchanged sets no state, so React and Ink do no work for it:
 * rebuilding and re-tokenising the full screen is most of an idle console's CPU time. Uptime to
 * the minute and whole percentages are what the body shows ({@link statusText}).
 */
export function screenKey(snap: Snapshot): string {
  const s = snap.status;
  return JSON.stringify([s && [s.hostname, statusText(s)], snap.network, snap.services, snap.models, snap.gpu, snap.warnings, snap.errors]);
}

function Prompt(props: { mode: Mode; notice: Notice | null; busy: string | null; keyFile: string; width: number; services: readonly string[] }): ReactElement {
  const { mode, notice, busy, width } = props;
  let text: ReactElement;
  if (busy) text = line(`${busy}…`, undefined, { color: 'yellow' });
  else if (mode.kind === 'confirm-rotate')
    text = line('Rotate the master key? Clients using the current key stop working.  y: rotate   any other key: cancel', undefined, { color: 'yellow' });
  else if (mode.kind === 'choose-service')
    text = line(`Restart which service?  ${props.services.map((n, i) => `${i + 1} ${n}`).join('  ')}   Esc: cancel`, undefined, { color: 'yellow' });
  else if (mode.kind === 'hostname')
    text = line(`New host name (letters, digits, hyphens): ${mode.text}▏  Enter: apply   Esc: cancel`, undefined, { color: 'yellow' });
  else if (notice) text = h(Text, { color: notice.tone === 'error' ? 'red' : notice.tone === 'secret' ? 'magenta' : 'green', wrap: 'wrap' }, notice.text);
  else text = line('r rotate key   s restart a service   h host name   k key file   q quit', undefined, { dimColor: true });
  return h(Box, { marginTop: 1, width }, text);
}

/** The whole screen. */
export function ConsoleApp(props: ConsoleProps): ReactElement {
  const { exit } = useApp();
  const { columns } = useTerminalSize();
  const [snap, setSnap] = useState<Snapshot | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  // Mode, notice and busy live in refs as well as in state: keys typed faster than a render (a
  // paste, or `h` then a name) must see the mode the previous key set, not the last rendered one.
  const [mode, setModeState] = useState<Mode>({ kind: 'main' });
  const [notice, setNoticeState] = useState<Notice | null>(null);
  const [busy, setBusyState] = useState<string | null>(null);
  const modeRef = useRef(mode);
  const noticeRef = useRef(notice);
  const busyRef = useRef(busy);
  const setMode = (m: Mode): void => void setModeState((modeRef.current = m));
  const setNotice = (n: Notice | null): void => void setNoticeState((noticeRef.current = n));
  const setBusy = (b: string | null): void => void setBusyState((busyRef.current = b));
  const [qrText, setQrText] = useState<{ url: string; text: string } | null>(null);
  const timer = useRef<NodeJS.Timeout | null>(null);
  const alive = useRef(true);
  // What the screen shows now (screenKey and the load error): a refresh that changes neither sets no state.
  const shown = useRef<{ key: string | null; error: string | null }>({ key: null, error: null });
  const showError = (error: string | null): void => {
    if (error !== shown.current.error) setLoadError((shown.current.error = error));
  };

  const refresh = useCallback(async () => {
    if (timer.current) clearTimeout(timer.current);
    try {
      const next = await props.load();
      if (!alive.current) return;
      const key = screenKey(next);
      if (key !== shown.current.key) {
        shown.current.key = key;
        setSnap(next);
      }
      // Nothing at all came back: the appliance is unreachable (or refuses the key).
      showError(next.status === null && next.network === null && next.services === null ? (Object.values(next.errors)[0] ?? null) : null);
    } catch (err) {
      if (alive.current) showError((err as Error).message);
    }
    if (alive.current) timer.current = setTimeout(() => void refresh(), props.intervalMs);
  }, [props.load, props.intervalMs]);

  useEffect(() => {
    void refresh();
    return () => {
      alive.current = false;
      if (timer.current) clearTimeout(timer.current);
    };
  }, [refresh]);

  const downloadUrl = caDownloadUrl(snap?.network?.urls ?? []);
  const serviceNames = (snap?.services ?? []).map((s) => s.name);
  useEffect(() => {
    if (!downloadUrl || qrText?.url === downloadUrl) return;
    void props.qr(downloadUrl).then((text) => alive.current && setQrText({ url: downloadUrl, text }));
  }, [downloadUrl]);

  const act = (label: string, run: () => Promise<Notice>): void => {
    setBusy(label);
    void run()
      .catch((err: Error) => ({ text: `${label} failed: ${err.message}`, tone: 'error' as const }))
      .then((n) => {
        if (!alive.current) return;
        setBusy(null);
        setNotice(n);
        void refresh();
      });
  };

  const onKey = (input: string, key: Key): void => {
    const mode = modeRef.current;
    const notice = noticeRef.current;
    if (busyRef.current) return;
    if (mode.kind === 'confirm-rotate') {
      setMode({ kind: 'main' });
      if (input === 'y' || input === 'Y') {
        act('Rotating the master key', async () => ({
          text: `New master key (shown once; also in ${props.keyFile}):\n${await props.actions.rotateKey()}`,
          tone: 'secret',
        }));
      }
      return;
    }
    if (mode.kind === 'choose-service') {
      const name = serviceNames[Number(input) - 1];
      setMode({ kind: 'main' });
      if (name && /^[1-9]$/.test(input)) act(`Restarting ${name}`, async () => ({ text: await props.actions.restartService(name), tone: 'info' }));
      return;
    }
    if (mode.kind === 'hostname') {
      if (key.escape) setMode({ kind: 'main' });
      else if (key.return) {
        setMode({ kind: 'main' });
        const name = mode.text.trim();
        if (name) act(`Renaming the host to ${name}`, async () => ({ text: await props.actions.setHostname(name), tone: 'info' }));
      } else if (key.backspace || key.delete) setMode({ kind: 'hostname', text: mode.text.slice(0, -1) });
      else if (/^[A-Za-z0-9-]+$/.test(input)) setMode({ kind: 'hostname', text: (mode.text + input).slice(0, 63) });
      return;
    }
    // A notice (the new key above all) stays until the next key, which only dismisses it.
    if (notice) {
      setNotice(null);
      if (notice.tone === 'secret') return;
    }
    if (input === 'q' || key.escape) exit();
    else if (input === 'r') setMode({ kind: 'confirm-rotate' });
    else if (input === 's') setMode({ kind: 'choose-service' });
    else if (input === 'h') setMode({ kind: 'hostname', text: '' });
    else if (input === 'k') setNotice({ text: `Master key file: ${props.keyFile}   (print it with: lia key show)`, tone: 'info' });
  };
  // Keys that arrive together (typed ahead, pasted) come as one string: take them one by one.
  useInput((input, key) => {
    if (input.length <= 1) return onKey(input, key);
    for (const ch of input) onKey(ch === '\r' ? '' : ch, { ...key, return: ch === '\r' });
  });

  const withQr = columns >= QR_MIN_COLUMNS;
  const bodyWidth = withQr ? columns - 40 : columns;
  return h(
    Box,
    { flexDirection: 'column', width: columns },
    h(
      Box,
      { flexDirection: 'row' },
      h(Body, { snap, fingerprint: props.fingerprint, width: bodyWidth, loadError }),
      withQr
        ? h(
            Box,
            { flexDirection: 'column', marginLeft: 2, width: 38 },
            h(Text, { bold: true, color: 'cyan' }, 'Scan to download the CA'),
            h(Text, { inverse: Boolean(qrText) }, qrText?.text.replace(/\n+$/, '') ?? (downloadUrl ? '…' : '(no URL to offer)')),
            downloadUrl ? h(Text, { wrap: 'wrap' }, downloadUrl) : null,
          )
        : null,
    ),
    withQr
      ? null
      : line(`CA download: ${downloadUrl ?? '(no URL)'}  (widen the terminal to ${QR_MIN_COLUMNS} columns for a QR code)`, undefined, { dimColor: true }),
    h(Prompt, { mode, notice, busy, keyFile: props.keyFile, width: columns, services: serviceNames }),
  );
}
