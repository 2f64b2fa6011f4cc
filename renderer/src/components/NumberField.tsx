// A labelled number input ("label [ 4 ]"): the label names the field for screen readers too.
export function NumberField({
  label,
  value,
  onChange,
  min,
  max,
  step,
  width,
  placeholder,
  title,
  className,
  testId,
}: {
  label: string;
  value: number | '';
  /** The field's text as typed ('' when emptied): the caller parses and clamps it. */
  onChange: (raw: string) => void;
  min?: number;
  max?: number;
  step?: number;
  width: number;
  placeholder?: string;
  title?: string;
  className?: string;
  testId: string;
}) {
  return (
    <label className={className} title={title}>
      {label}{' '}
      <input
        type="number"
        min={min}
        max={max}
        step={step}
        style={{ width }}
        value={value}
        placeholder={placeholder}
        onChange={(e) => onChange(e.target.value)}
        data-testid={testId}
      />
    </label>
  );
}
