/** The model's text without chat-template markup (<|im_start|>, <|im_end|>, <|endoftext|>, …): what it said, not how it was framed. */
export function withoutTemplateTokens(text: string): string {
  return text.replace(/<\|[^|<>\s]{1,40}\|>/g, '').replace(/^\s*assistant\s*\n/, '');
}
