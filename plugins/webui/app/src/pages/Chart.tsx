/**
 * A small uPlot line chart of recent samples (time in seconds, one or more series). uPlot is its
 * own chunk, fetched when the first chart mounts: the page's figures and tables paint without
 * waiting for the chart library.
 */
import { useEffect, useRef } from 'preact/hooks';
import type uPlot from 'uplot';

/** The chart library and its stylesheet, loaded once. */
let library: Promise<typeof uPlot> | null = null;
const loadLibrary = (): Promise<typeof uPlot> => (library ??= import('./chart-library').then((m) => m.default));

/**
 * The rows uPlot draws. With no sample yet the time axis still needs an end, so an empty chart
 * gets one point at the present with no values.
 */
function plotData(times: number[], series: Series[]): uPlot.AlignedData {
  if (times.length > 0) return [times, ...series.map((s) => s.values)];
  return [[Date.now() / 1000], ...series.map(() => [null])];
}

/**
 * The time axis: the `span` seconds up to the last sample. It is computed from the samples, not
 * from the range uPlot proposes: for a single time point uPlot widens the range by 86,400 of its
 * time units, which with times in seconds puts the axis's end 1,000 days ahead.
 */
function lastSpan(times: ArrayLike<number>, span: number): uPlot.Range.MinMax {
  const end = times.length > 0 ? (times[times.length - 1] as number) : Date.now() / 1000;
  return [end - span, end];
}

export interface Series {
  label: string;
  color: string;
  values: (number | null)[];
}

/** `span`: seconds of history the time axis always shows, so a few samples do not fill it. */
export function Chart({ title, times, series, max, span }: { title: string; times: number[]; series: Series[]; max?: number; span: number }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const key = series.map((s) => s.label).join('|');

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    let gone = false;
    let resize: ResizeObserver | null = null;
    void loadLibrary().then((UPlot) => {
      if (gone) return;
      const width = Math.max(200, el.clientWidth);
      plot.current = new UPlot(
        {
          width,
          height: 160,
          legend: { show: true },
          scales: { x: { time: true, range: (u) => lastSpan(u.data[0], span) }, y: max !== undefined ? { range: [0, max] } : {} },
          axes: [
            { stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.2)' } },
            { stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.2)' } },
          ],
          series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2 }))],
          // The time axis is drawn on a canvas; its range is also written on the element (seconds
          // since the epoch), for tools that read the page rather than the pixels.
          hooks: {
            setScale: [(u, scale) => scale === 'x' && Object.assign(el.dataset, { timeFrom: String(u.scales['x']?.min), timeTo: String(u.scales['x']?.max) })],
          },
        },
        plotData(times, series),
        el,
      );
      resize = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(200, el.clientWidth), height: 160 }));
      resize.observe(el);
    });
    return () => {
      gone = true;
      resize?.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);

  useEffect(() => {
    plot.current?.setData(plotData(times, series));
  });

  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title}: chart of the last minutes`} />
    </figure>
  );
}
