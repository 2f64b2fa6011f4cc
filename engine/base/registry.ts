/**
 * A registry of named entries chosen by a config value (advantage estimators, policy losses,
 * tool-call formats, task kinds). It starts empty: every entry, built in or a plugin's, registers
 * itself from its own module (engine/builtins.ts lists the built-in ones) under a config name none
 * has yet. `words` name things in its errors: the register function, an entry (with its article),
 * the config field, and an entry in "unknown …".
 */
export class NamedRegistry<T extends { default?: boolean }> {
  private readonly entries = new Map<string, T>();
  private defaultEntry: string | undefined;

  constructor(
    private readonly words: [register: string, entry: string, field: string, unknown: string],
    /** What a config name may be (formats allow '-', as in search-r1). */
    private readonly namePattern: RegExp = /^[a-z][a-z0-9_]*$/,
  ) {}

  register(name: string, value: T): void {
    const [register, entry] = this.words;
    if (!this.namePattern.test(name))
      throw new Error(`${register}: "${name}" is not a config name (lowercase letters, digits, _${this.namePattern.source.includes('-') ? ' and -' : ''})`);
    if (this.entries.has(name)) throw new Error(`${register}: ${entry} "${name}" is already registered`);
    if (value.default && this.defaultEntry) throw new Error(`${register}: "${name}" says it is the default, but "${this.defaultEntry}" is`);
    this.entries.set(name, value);
    if (value.default) this.defaultEntry = name;
  }

  /** The config's default choice: the entry registered with `default: true` (a built-in one), else the first registered. */
  defaultName(): string | undefined {
    return this.defaultEntry ?? this.entries.keys().next().value;
  }

  /** Every registered name, the default first (the config's choices, in the order the schema lists them). */
  names(): string[] {
    const d = this.defaultName();
    return d === undefined ? [] : [d, ...[...this.entries.keys()].filter((n) => n !== d)];
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  get(name: string): T {
    const e = this.entries.get(name);
    const [, , field, unknown] = this.words;
    if (!e)
      throw new Error(
        this.entries.size
          ? `${field}: unknown ${unknown} "${name}"; available: ${this.names().join(', ')}`
          : `${field}: unknown ${unknown} "${name}"; none is registered in this process (the built-in ones register when engine/builtins.ts is imported)`,
      );
    return e;
  }

  entriesList(): [string, T][] {
    return [...this.entries];
  }
}

/**
 * One row of `arbor export verl`'s mapping that a registry entry contributes for itself: the Arbor
 * keys it accounts for, the verl Hydra overrides they become (none: verl has no equivalent) and a
 * note for the README (engine/interop/verl-export.ts).
 */
export interface VerlRow {
  keys: string | string[];
  verl?: Record<string, unknown>;
  note?: string;
}

/**
 * Shared config keys an entry reads (dotted key → what for, completing "read by <entry>: …"). A key
 * some registered entry reads is refused under an entry that does not (engine/config/experiment.ts
 * readsRules), so no entry's name is written in another's rule.
 */
export type KeyReads = Record<string, string>;
