/**
 * A registry of named entries chosen by a config value (advantage estimators, policy losses): the
 * built-in ones, then those registered at run time (plugins) under a config name none has yet.
 * `words` name things in its errors: the register function, an entry (with its article), the
 * config field, and an entry in "unknown …".
 */
export class NamedRegistry<T> {
  private readonly entries: Map<string, T>;

  constructor(
    builtIn: Record<string, T>,
    private readonly words: [register: string, entry: string, field: string, unknown: string],
  ) {
    this.entries = new Map(Object.entries(builtIn));
  }

  register(name: string, value: T): void {
    const [register, entry] = this.words;
    if (!/^[a-z][a-z0-9_]*$/.test(name)) throw new Error(`${register}: "${name}" is not a config name (lowercase letters, digits, _)`);
    if (this.entries.has(name)) throw new Error(`${register}: ${entry} "${name}" is already registered`);
    this.entries.set(name, value);
  }

  names(): string[] {
    return [...this.entries.keys()];
  }

  get(name: string): T {
    const e = this.entries.get(name);
    const [, , field, unknown] = this.words;
    if (!e) throw new Error(`${field}: unknown ${unknown} "${name}"; available: ${this.names().join(', ')}`);
    return e;
  }
}
