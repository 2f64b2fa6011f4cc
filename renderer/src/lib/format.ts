/** Compact number formatting for tables, legends and axes. */
export function fmt(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a >= 1e4 || a < 1e-3) return v.toExponential(2);
  if (Number.isInteger(v)) return String(v);
  return v.toPrecision(4);
}
