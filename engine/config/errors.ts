/** A config error: `field` is the dotted path, `message` says what is wrong and what is allowed. */
export class ConfigError extends Error {
  constructor(
    readonly issues: { field: string; message: string }[],
    readonly file?: string,
  ) {
    super((file ? `invalid config ${file}:\n` : 'invalid config:\n') + issues.map((i) => `  ${i.field || '(root)'}: ${i.message}`).join('\n'));
    this.name = 'ConfigError';
  }
}
