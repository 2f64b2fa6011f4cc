import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildProgram, COMMAND_MODULES } from '../../../engine/cli/main';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');

// `arbor <command>` loads only the modules COMMAND_MODULES names for it (engine/cli/main.ts):
// the table must name, for every command the full program has, modules that define it exactly as
// the full program does (its help, options and subcommands).
describe('CLI dispatch (COMMAND_MODULES)', () => {
  it('names, for every top-level command, modules that define it as the full program does', async () => {
    const full = await buildProgram();
    const names = full.commands.map((c) => c.name());
    expect(Object.keys(COMMAND_MODULES).sort()).toEqual([...names].sort());
    for (const name of names) {
      const partial = await buildProgram(undefined, COMMAND_MODULES[name]);
      const cmd = partial.commands.find((c) => c.name() === name);
      const want = full.commands.find((c) => c.name() === name)!;
      expect(cmd, name).toBeDefined();
      const helps = (c: typeof want): string[] => [c.helpInformation(), ...c.commands.flatMap(helps)];
      expect(helps(cmd!), name).toEqual(helps(want));
    }
  });

  it('a name that is not a command (an Object property included) still gets the full program', () => {
    const r = spawnSync(process.execPath, [bin, 'constructor'], { encoding: 'utf8', timeout: 120_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("unknown command 'constructor'");
  });
});
