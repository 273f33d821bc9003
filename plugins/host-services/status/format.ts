/**
 * Size strings of `/system/status`: binary units with one decimal, `"<number>G"` for the model
 * disk and `"<number>T"` (from 1 TiB up) or `"<number>G"` for the total, as `df -h` prints them.
 *
 * @module
 */

const GIB = 1024 ** 3;
const TIB = 1024 ** 4;

function oneDecimal(value: number): string {
  return String(Math.round(value * 10) / 10);
}

/** Bytes as gibibytes: `"457.9G"`. */
export function toGiB(bytes: number): string {
  return `${oneDecimal(bytes / GIB)}G`;
}

/** Bytes as `"1.8T"` from 1 TiB up, else as gibibytes. */
export function toTiBOrGiB(bytes: number): string {
  return bytes >= TIB ? `${oneDecimal(bytes / TIB)}T` : toGiB(bytes);
}
