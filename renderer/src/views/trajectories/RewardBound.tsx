/** One end of the reward filter (empty: no bound). */
export function RewardBound({
  label,
  aria,
  value,
  onChange,
}: {
  label: string;
  aria: string;
  value: number | undefined;
  onChange: (v: number | undefined) => void;
}) {
  return (
    <>
      <label className="muted">{label}</label>
      <input
        type="number"
        step="any"
        style={{ width: 64 }}
        value={value ?? ''}
        aria-label={aria}
        onChange={(e) => onChange(e.target.value === '' ? undefined : Number(e.target.value))}
      />
    </>
  );
}
