import { useEffect, useState } from 'react';
import { useArbor } from '../../store/react';

/** The run's tags and notes, edited in place and saved to the workspace. */
export function RunNotes() {
  const run = useArbor((s) => s.run.detail)!;
  const saveNotes = useArbor((s) => s.runActions.saveNotes);
  const saveTags = useArbor((s) => s.runActions.saveTags);
  const [notes, setNotes] = useState(run.notes);
  const [tags, setTags] = useState(run.tags.join(', '));
  const [saved, setSaved] = useState<string | null>(null);
  useEffect(() => setNotes(run.notes), [run.id, run.notes]);
  useEffect(() => setTags(run.tags.join(', ')), [run.id, run.tags]);
  const commitTags = async () => {
    const next = tags
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    if (next.join(',') !== run.tags.join(',') && (await saveTags(next))) setSaved('tags saved');
  };
  return (
    <div className="toolbar run-notes">
      <label className="muted">
        tags{' '}
        <input
          data-testid="run-tags-edit"
          value={tags}
          placeholder="comma-separated"
          onChange={(e) => setTags(e.target.value)}
          onBlur={() => void commitTags()}
          onKeyDown={(e) => e.key === 'Enter' && void commitTags()}
        />
      </label>
      <textarea
        data-testid="run-notes"
        aria-label="notes"
        className="grow"
        rows={1}
        placeholder="notes: what this run tests, what you saw (saved when you leave the field)"
        value={notes}
        onChange={(e) => setNotes(e.target.value)}
        onBlur={async () => {
          if (notes !== run.notes && (await saveNotes(notes))) setSaved('notes saved');
        }}
      />
      {saved ? (
        <span className="muted" data-testid="run-notes-saved">
          {saved}
        </span>
      ) : null}
    </div>
  );
}
