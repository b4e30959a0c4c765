import type { DomainSpec, RowData, TableSpec } from '../domain-spec.ts';
import { randomDate, randomTime } from '../dates.ts';
import type { Mulberry32 } from '@sqlenv/shared';
import { nameSupply, STANDARD_VOCABULARY, type Vocabulary } from '../vocabulary.ts';
import { clinicTemplates } from './clinic-questions.ts';

/** An outpatient clinic; singular table names, a different convention from the other domains. */
const tables: readonly TableSpec[] = [
  {
    name: 'doctor',
    columns: [
      { name: 'doctor_id', type: 'INTEGER', primaryKey: true },
      { name: 'first_name', type: 'TEXT' },
      { name: 'last_name', type: 'TEXT' },
      { name: 'specialty', type: 'TEXT' },
      { name: 'years_experience', type: 'INTEGER' },
      { name: 'consultation_fee', type: 'REAL' },
    ],
  },
  {
    name: 'patient',
    columns: [
      { name: 'patient_id', type: 'INTEGER', primaryKey: true },
      { name: 'first_name', type: 'TEXT' },
      { name: 'last_name', type: 'TEXT' },
      { name: 'birth_date', type: 'TEXT', temporal: true },
      { name: 'sex', type: 'TEXT' },
      { name: 'city', type: 'TEXT' },
      { name: 'insurance_provider', type: 'TEXT', nullable: true },
    ],
  },
  {
    name: 'appointment',
    columns: [
      { name: 'appointment_id', type: 'INTEGER', primaryKey: true },
      { name: 'patient_id', type: 'INTEGER', references: { table: 'patient', column: 'patient_id' } },
      { name: 'doctor_id', type: 'INTEGER', references: { table: 'doctor', column: 'doctor_id' } },
      { name: 'appointment_date', type: 'TEXT', temporal: true },
      { name: 'appointment_time', type: 'TEXT', temporal: true },
      { name: 'status', type: 'TEXT' },
      { name: 'reason', type: 'TEXT' },
    ],
  },
  {
    name: 'medication',
    columns: [
      { name: 'medication_id', type: 'INTEGER', primaryKey: true },
      { name: 'name', type: 'TEXT' },
      { name: 'drug_class', type: 'TEXT' },
      { name: 'unit_price', type: 'REAL' },
    ],
  },
  {
    name: 'prescription',
    columns: [
      { name: 'prescription_id', type: 'INTEGER', primaryKey: true },
      { name: 'appointment_id', type: 'INTEGER', references: { table: 'appointment', column: 'appointment_id' } },
      { name: 'medication_id', type: 'INTEGER', references: { table: 'medication', column: 'medication_id' } },
      { name: 'dosage_mg', type: 'INTEGER' },
      { name: 'duration_days', type: 'INTEGER' },
      { name: 'refills', type: 'INTEGER' },
    ],
  },
];

/** Specialty, doctors, base fee, visit reasons, and the drug classes it prescribes (Radiology: none). */
const SPECIALTIES: readonly (readonly [specialty: string, doctors: number, fee: number, reasons: readonly string[], classes: readonly string[]])[] = [
  ['General Practice', 4, 60, ['Annual checkup', 'Flu symptoms', 'Sore throat', 'Blood pressure check', 'Vaccination'], ['Antibiotic', 'Analgesic', 'Antihypertensive', 'Antidiabetic', 'Antihistamine', 'Proton pump inhibitor']],
  ['Cardiology', 3, 140, ['Chest pain', 'Hypertension follow-up', 'Palpitations', 'ECG review'], ['Antihypertensive', 'Statin']],
  ['Dermatology', 2, 110, ['Skin rash', 'Mole check', 'Acne treatment', 'Eczema flare-up'], ['Corticosteroid', 'Antihistamine', 'Antibiotic']],
  ['Pediatrics', 3, 75, ['Well-child visit', 'Ear infection', 'Fever', 'Vaccination'], ['Antibiotic', 'Analgesic', 'Antihistamine']],
  ['Orthopedics', 2, 130, ['Knee pain', 'Back pain', 'Fracture follow-up', 'Sports injury'], ['Analgesic', 'Corticosteroid']],
  ['Neurology', 2, 150, ['Migraine', 'Dizziness', 'Numbness in hands'], ['Antimigraine', 'Analgesic']],
  ['Psychiatry', 2, 160, ['Anxiety', 'Depression follow-up', 'Sleep problems'], ['Antidepressant']],
  ['Radiology', 2, 120, ['X-ray review', 'MRI consultation'], []],
];

/** Medication, class, usual strengths in mg, pack price in dollars. */
const MEDICATIONS: readonly (readonly [name: string, drugClass: string, strengthsMg: readonly number[], price: number])[] = [
  ['Amoxicillin', 'Antibiotic', [250, 500], 8.5], ['Azithromycin', 'Antibiotic', [250, 500], 14.2], ['Ciprofloxacin', 'Antibiotic', [250, 500, 750], 11.75],
  ['Ibuprofen', 'Analgesic', [200, 400, 600], 4.99], ['Paracetamol', 'Analgesic', [500, 1000], 3.25], ['Naproxen', 'Analgesic', [250, 500], 6.4],
  ['Lisinopril', 'Antihypertensive', [5, 10, 20], 9.8], ['Amlodipine', 'Antihypertensive', [5, 10], 7.15], ['Losartan', 'Antihypertensive', [25, 50, 100], 12.6],
  ['Atorvastatin', 'Statin', [10, 20, 40], 15.3], ['Simvastatin', 'Statin', [10, 20, 40], 9.45],
  ['Sertraline', 'Antidepressant', [50, 100], 18.9], ['Fluoxetine', 'Antidepressant', [20, 40], 13.4], ['Escitalopram', 'Antidepressant', [10, 20], 21.15],
  ['Cetirizine', 'Antihistamine', [10], 5.6], ['Loratadine', 'Antihistamine', [10], 6.1],
  ['Metformin', 'Antidiabetic', [500, 850, 1000], 7.9], ['Prednisolone', 'Corticosteroid', [5, 10, 20], 10.35],
  ['Sumatriptan', 'Antimigraine', [50, 100], 24.5], ['Omeprazole', 'Proton pump inhibitor', [20, 40], 8.05],
  // No specialty prescribes anticoagulants here, so these never appear in prescriptions.
  ['Warfarin', 'Anticoagulant', [1, 5], 11.2], ['Apixaban', 'Anticoagulant', [5], 42.75],
];

/** Typical treatment lengths in days: short courses for acute drugs, months for chronic ones. */
const DURATIONS_DAYS: Readonly<Record<string, readonly number[]>> = {
  Antibiotic: [5, 7, 10],
  Analgesic: [3, 5, 7, 14],
  Antihistamine: [14, 30],
  Corticosteroid: [5, 7, 14],
  Antimigraine: [30],
};
const CHRONIC_DURATIONS_DAYS = [30, 90] as const;

const INSURERS = [['BlueShield', 4], ['CareFirst', 3], ['HealthPlus', 3], ['Medico', 2], ['UnityCare', 1]] as const;
/** Appointments after this date have not happened yet. */
const LAST_PAST_DAY = '2024-11-30';

function generateRows(rng: Mulberry32, vocabulary: Vocabulary = STANDARD_VOCABULARY): Map<string, RowData[]> {
  const nextName = nameSupply(rng.fork('names'), vocabulary);
  const staff = SPECIALTIES.flatMap((spec) => Array.from({ length: spec[1] }, () => spec)).map((spec, i) => {
    const [specialty, , fee] = spec;
    const [first, last] = nextName();
    const row: RowData = {
      doctor_id: i + 1,
      first_name: first,
      last_name: last,
      specialty,
      years_experience: rng.int(2, 35),
      consultation_fee: fee + rng.int(-2, 4) * 5 + rng.pick([0, 0.5]),
    };
    return { row, spec };
  });
  const doctors = staff.map((member) => member.row);

  const patients = Array.from({ length: 150 }, (_, i): RowData => {
    const [first, last] = nextName();
    return {
    patient_id: i + 1,
    first_name: first,
    last_name: last,
    birth_date: randomDate(rng, '1938-01-01', '2021-12-31'),
    sex: rng.pick(['F', 'M']),
    city: rng.weighted(vocabulary.towns),
    insurance_provider: rng.chance(0.15) ? null : rng.weighted(INSURERS),
    };
  });

  const medications = MEDICATIONS.map(([name, drugClass, , price], i): RowData => ({
    medication_id: i + 1,
    name,
    drug_class: drugClass,
    unit_price: price,
  }));

  const appointments: RowData[] = [];
  const prescriptions: RowData[] = [];
  // Some patients are regulars: draw from a smaller pool half of the time.
  const regulars = rng.sample(patients, 25);
  for (let i = 0; i < 380; i++) {
    const patient = rng.chance(0.3) ? rng.pick(regulars) : rng.pick(patients);
    const { row: doctor, spec } = rng.pick(staff);
    const [, , , reasons, classes] = spec;
    const date = randomDate(rng, '2023-01-02', '2024-12-31');
    const status = date > LAST_PAST_DAY ? 'scheduled' : rng.weighted([['completed', 16], ['cancelled', 3], ['no-show', 2]] as const);
    const appointmentId = i + 1;
    appointments.push({
      appointment_id: appointmentId,
      patient_id: patient.patient_id ?? null,
      doctor_id: doctor.doctor_id ?? null,
      appointment_date: date,
      appointment_time: randomTime(rng, 8, 18),
      status,
      reason: rng.pick(reasons),
    });
    if (status !== 'completed' || classes.length === 0) continue;
    const candidates = MEDICATIONS.filter(([, drugClass]) => classes.includes(drugClass));
    const count = rng.weighted([[0, 4], [1, 5], [2, 2]]);
    for (const [name, drugClass, strengths] of rng.sample(candidates, count)) {
      prescriptions.push({
        prescription_id: prescriptions.length + 1,
        appointment_id: appointmentId,
        medication_id: MEDICATIONS.findIndex((m) => m[0] === name) + 1,
        dosage_mg: rng.pick(strengths),
        duration_days: rng.pick(DURATIONS_DAYS[drugClass] ?? CHRONIC_DURATIONS_DAYS),
        refills: rng.weighted([[0, 5], [1, 3], [2, 1], [3, 1]]),
      });
    }
  }

  return new Map([
    ['doctor', doctors],
    ['patient', patients],
    ['appointment', appointments],
    ['medication', medications],
    ['prescription', prescriptions],
  ]);
}

export const clinic: DomainSpec = {
  dbId: 'clinic',
  title: 'Clinic',
  summary: 'An outpatient clinic: doctors by specialty, patients, appointments, medications and prescriptions.',
  tables,
  generateRows,
  templates: clinicTemplates,
};
