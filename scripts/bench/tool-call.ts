/**
 * `npm run bench:tool-call [-- --calls N --reps R --json]`: the per-call cost of a user tool under
 * each isolation (./tool-calls.ts); bench:rollout prints the same rows after its decode tables.
 */
import { measureToolCalls, printToolCallRows } from './tool-calls';

const args = process.argv.slice(2);
const num = (flag: string, d: number) => {
  const i = args.indexOf(flag);
  const v = i >= 0 ? Number(args[i + 1]) : d;
  if (!Number.isInteger(v) || v < 1) throw new Error(`${flag} must be an integer ≥ 1 (got ${args[i + 1]})`);
  return v;
};
const rows = await measureToolCalls({ calls: num('--calls', 1000), reps: num('--reps', 3) });
if (args.includes('--json')) console.log(JSON.stringify({ toolCalls: rows }));
else printToolCallRows(rows);
