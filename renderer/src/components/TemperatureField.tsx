// The sampling temperature field the fork panel, the live stepper and the chat share (0 = greedy).
// With `optional`, an empty field means "the run's own" (null).
import { NumberField } from './NumberField';

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
    <NumberField
      label="temperature"
      className={className}
      title={optional ? "sampling temperature (0 = greedy); empty: the run's eval.temperature" : 'sampling temperature (0 = greedy)'}
      min={0}
      step={0.1}
      width={56}
      value={value ?? ''}
      placeholder={optional ? "run's" : undefined}
      onChange={(raw) => onChange(raw === '' ? (optional ? null : 0) : Math.max(0, Number(raw) || 0))}
      testId={testId}
    />
  );
}
