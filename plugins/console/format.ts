/**
 * Pure formatting for the device console: the CA fingerprint in groups a person can read aloud
 * and compare, sizes, durations and the warning lines picked from the service logs.
 *
 * @module
 */

/**
 * Splits a SHA-256 fingerprint (`AB:CD:…` as OpenSSL prints it, or bare hex) into groups of
 * `groupSize` hex digits (default 4), `perLine` groups to a line (default 4): 64 digits become four
 * lines of `ABCD  EF01  2345  6789`. Upper case, so it reads the same as a browser's certificate
 * viewer. Anything that is not hex is dropped before grouping.
 */
export function groupFingerprint(fingerprint: string, groupSize = 4, perLine = 4): string[] {
  const hex = fingerprint.replace(/[^0-9a-f]/gi, '').toUpperCase();
  const groups: string[] = [];
  for (let i = 0; i < hex.length; i += groupSize) groups.push(hex.slice(i, i + groupSize));
  const lines: string[] = [];
  for (let i = 0; i < groups.length; i += perLine) lines.push(groups.slice(i, i + perLine).join('  '));
  return lines;
}

/** Bytes in binary units with one decimal: `1.5 GiB`, `512 MiB`. */
export function formatSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : Math.round(value * 10) / 10} ${units[unit]}`;
}

/**
 * Seconds as `3d 4h`, `2h 5m` or `4m`, to the minute like `uptime`: the screen then stays the
 * same between refreshes while nothing happens, and is not redrawn.
 */
export function formatUptime(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  return d > 0 ? `${d}d ${h}h` : h > 0 ? `${h}h ${m}m` : `${m}m`;
}

/** One log line of `GET /system/logs`. */
export interface LogEntry {
  timestamp: string;
  /** syslog priority: 0 (emerg) .. 7 (debug). */
  priority: number;
  message: string;
}

/** A warning shown on the console: when, which service, what. */
export interface Warning {
  timestamp: string;
  service: string;
  message: string;
}

/** Syslog priority 4 (warning) and more severe. */
export const WARNING_PRIORITY = 4;

/**
 * The `limit` most recent warnings (priority ≤ 4) across services, newest first, each message cut
 * to its first line.
 */
export function recentWarnings(logs: Record<string, LogEntry[]>, limit: number): Warning[] {
  const all: Warning[] = [];
  for (const [service, lines] of Object.entries(logs)) {
    for (const l of lines) {
      if (l.priority <= WARNING_PRIORITY) all.push({ timestamp: l.timestamp, service, message: l.message.split('\n')[0] ?? '' });
    }
  }
  return all.sort((a, b) => (a.timestamp < b.timestamp ? 1 : a.timestamp > b.timestamp ? -1 : 0)).slice(0, limit);
}

/** `text` cut to `width` characters with an ellipsis. */
export function clip(text: string, width: number): string {
  if (width <= 1) return text.slice(0, Math.max(0, width));
  return text.length > width ? `${text.slice(0, width - 1)}…` : text;
}

/**
 * The CA download URL to put in the QR code: on the first advertised URL that is not `localhost`
 * (a phone cannot reach the device's localhost), else on the first one.
 */
export function caDownloadUrl(urls: readonly string[]): string | null {
  const base = urls.find((u) => !/^https:\/\/localhost[:/]/.test(u)) ?? urls[0];
  return base ? `${base}/system/ca-cert` : null;
}
