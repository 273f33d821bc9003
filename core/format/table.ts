/**
 * Rows as aligned columns for the CLI's listings (`lia list`, `lia ps`, `lia key list`, `lia
 * status`): each column as wide as its widest cell, `gap` spaces between columns (4 unless told,
 * as `ollama list`), the last column unpadded and no line ending in spaces. Every line, the
 * header row included, ends with a newline.
 */
export function table(rows: ReadonlyArray<readonly string[]>, gap = 4): string {
  if (rows.length === 0) return '';
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map(
      (r) =>
        `${r
          .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]! + gap)))
          .join('')
          .trimEnd()}\n`,
    )
    .join('');
}
