// The sampling temperature field the fork panel, the live stepper and the chat share (0 = greedy).
// With `optional`, an empty field means "the run's own" (null).
export function TemperatureField({
  value,
  onChange,
  testId,
  optional = false,
  className,
}: {
  value: number | null;
  onChange: (t: number | null) => void;
  testId: string;
  optional?: boolean;
  className?: string;
}) {
  return (
    <label
      className={className}
      title={optional ? "sampling temperature (0 = greedy); empty: the run's eval.temperature" : 'sampling temperature (0 = greedy)'}
    >
      temperature{' '}
      <input
        type="number"
        min={0}
        step={0.1}
        style={{ width: 56 }}
        value={value ?? ''}
        placeholder={optional ? "run's" : undefined}
        onChange={(e) => onChange(e.target.value === '' ? (optional ? null : 0) : Math.max(0, Number(e.target.value) || 0))}
        data-testid={testId}
      />
    </label>
  );
}
