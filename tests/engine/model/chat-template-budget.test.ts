// A model folder's chat template is code from elsewhere (issue 37, item 8): one that loops is
// stopped with a named error instead of holding the engine; ordinary templates render as before.
import { Template } from '@huggingface/jinja';
import { describe, expect, it } from 'vitest';
import { ChatTemplateTimeout, renderChatTemplate } from '../../../engine/model/chat-template';

describe('chat template rendering has a time budget', () => {
  it('renders an ordinary template, ranges included', () => {
    const t = new Template(
      '{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}',
    );
    expect(renderChatTemplate(t, { messages: [{ role: 'user', content: 'hi' }] })).toBe('<user>hi012135');
  });

  it('stops range(100000000) and an endless loop of evaluation with ChatTemplateTimeout', () => {
    const big = new Template('{% for i in range(100000000) %}{{ i }}{% endfor %}');
    expect(() => renderChatTemplate(big, {})).toThrow(ChatTemplateTimeout);
    expect(() => renderChatTemplate(big, {})).toThrow(/range\(\) of 100000000 items/);
    // Nested loops under the range limit: bounded by the clock.
    const slow = new Template('{% for i in range(100000) %}{% for j in range(100000) %}{{ "" }}{% endfor %}{% endfor %}');
    expect(() => renderChatTemplate(slow, {}, 200)).toThrow(/did not finish rendering within 200 ms/);
    // The guard is off outside a budgeted render.
    expect(new Template('{{ 1 + 1 }}').render({})).toBe('2');
  });
});
