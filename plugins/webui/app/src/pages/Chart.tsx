/** A small uPlot line chart of recent samples (time in seconds, one or more series). */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

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
    const width = Math.max(200, el.clientWidth);
    plot.current = new uPlot(
      {
        width,
        height: 160,
        legend: { show: true },
        scales: { x: { time: true, range: (_u, _min, end) => [end - span, end] }, y: max !== undefined ? { range: [0, max] } : {} },
        axes: [{ stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.2)' } }, { stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,0.2)' } }],
        series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2 }))],
      },
      [times, ...series.map((s) => s.values)],
      el,
    );
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(200, el.clientWidth), height: 160 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);

  useEffect(() => {
    plot.current?.setData([times, ...series.map((s) => s.values)]);
  });

  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title}: chart of the last minutes`} />
    </figure>
  );
}
