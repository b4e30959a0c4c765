import { MONTH_NAMES } from '../dates.ts';
import { defineTemplate, noTieAfter, sqlText as t, type QuestionTemplate } from '../question-template.ts';

const CITY = 'SELECT DISTINCT city FROM patient ORDER BY city';
const SPECIALTY = 'SELECT DISTINCT specialty FROM doctor ORDER BY specialty';
const PRESCRIBING_SPECIALTY = 'SELECT DISTINCT d.specialty FROM doctor d JOIN appointment a ON a.doctor_id = d.doctor_id JOIN prescription p ON p.appointment_id = a.appointment_id ORDER BY d.specialty';
const DOCTOR = 'SELECT first_name, last_name FROM doctor ORDER BY doctor_id';
const DRUG_CLASS = 'SELECT DISTINCT drug_class FROM medication ORDER BY drug_class';
const PRESCRIBED_MED = 'SELECT DISTINCT m.name FROM medication m JOIN prescription p ON p.medication_id = m.medication_id ORDER BY m.name';
const TREATED_PATIENT = "SELECT DISTINCT pa.first_name, pa.last_name FROM patient pa JOIN appointment a ON a.patient_id = pa.patient_id WHERE a.status = 'completed' ORDER BY pa.patient_id";
const STATUS = 'SELECT DISTINCT status FROM appointment ORDER BY status';

const named = (name: readonly [string, string], alias: string): string =>
  `${alias}.first_name = ${t(name[0])} AND ${alias}.last_name = ${t(name[1])}`;
const dr = (name: readonly [string, string]): string => `Dr. ${name.join(' ')}`;

export const clinicTemplates: readonly QuestionTemplate[] = [
  defineTemplate({
    id: 'patients-in-city', answer: 'integer', instances: 3,
    params: (p) => ({ city: p.text(CITY) }),
    question: ({ city }) => `How many patients live in ${city}?`,
    sql: ({ city }) => `SELECT COUNT(*) FROM patient WHERE city = ${t(city)}`,
  }),
  defineTemplate({
    id: 'doctors-in-specialty', answer: 'integer', instances: 2,
    params: (p) => ({ specialty: p.text(SPECIALTY) }),
    question: ({ specialty }) => `How many doctors at the clinic work in ${specialty}?`,
    sql: ({ specialty }) => `SELECT COUNT(*) FROM doctor WHERE specialty = ${t(specialty)}`,
  }),
  defineTemplate({
    id: 'doctor-specialty', answer: 'string', instances: 3,
    params: (p) => ({ name: p.pair(DOCTOR) }),
    question: ({ name }) => `What is the specialty of ${dr(name)}?`,
    sql: ({ name }) => `SELECT specialty FROM doctor d WHERE ${named(name, 'd')}`,
  }),
  defineTemplate({
    id: 'doctor-fee', answer: 'float', instances: 2,
    params: (p) => ({ name: p.pair(DOCTOR) }),
    question: ({ name }) => `What consultation fee does ${dr(name)} charge?`,
    sql: ({ name }) => `SELECT consultation_fee FROM doctor d WHERE ${named(name, 'd')}`,
  }),
  defineTemplate({
    id: 'average-fee-by-specialty', answer: 'float', instances: 3,
    params: (p) => ({ specialty: p.text(SPECIALTY) }),
    question: ({ specialty }) => `What is the average consultation fee of ${specialty} doctors, rounded to two decimals?`,
    sql: ({ specialty }) => `SELECT ROUND(AVG(consultation_fee), 2) FROM doctor WHERE specialty = ${t(specialty)}`,
  }),
  defineTemplate({
    id: 'doctor-appointments-by-status', answer: 'integer', instances: 3,
    params: (p) => ({ name: p.pair(DOCTOR), status: p.text(STATUS) }),
    question: ({ name, status }) => `How many of ${dr(name)}'s appointments have the status '${status}'?`,
    sql: ({ name, status }) => `SELECT COUNT(*) FROM appointment a JOIN doctor d ON d.doctor_id = a.doctor_id WHERE ${named(name, 'd')} AND a.status = ${t(status)}`,
  }),
  defineTemplate({
    id: 'medications-in-class', answer: 'list', instances: 3,
    params: (p) => ({ drugClass: p.text(DRUG_CLASS) }),
    question: ({ drugClass }) => `Which medications in the ${drugClass} class does the clinic stock?`,
    sql: ({ drugClass }) => `SELECT name FROM medication WHERE drug_class = ${t(drugClass)} ORDER BY name`,
  }),
  defineTemplate({
    id: 'uninsured-older-patients', answer: 'integer', instances: 3,
    params: (p) => ({ year: p.pick([1950, 1960, 1970, 1980, 1990, 2000]) }),
    question: ({ year }) => `How many patients born before ${year} have no insurance provider on file?`,
    sql: ({ year }) => `SELECT COUNT(*) FROM patient WHERE birth_date < '${year}-01-01' AND insurance_provider IS NULL`,
  }),
  defineTemplate({
    id: 'insurers-in-city', answer: 'list', instances: 3,
    params: (p) => ({ city: p.text(CITY) }),
    question: ({ city }) => `Which insurance providers cover at least one patient living in ${city}?`,
    sql: ({ city }) => `SELECT DISTINCT insurance_provider FROM patient WHERE city = ${t(city)} AND insurance_provider IS NOT NULL ORDER BY insurance_provider`,
  }),
  defineTemplate({
    id: 'specialty-overview', answer: 'table', instances: 1,
    params: () => ({}),
    question: () => 'For each specialty, give the number of doctors and their average years of experience rounded to one decimal.',
    sql: () => 'SELECT specialty, COUNT(*), ROUND(AVG(years_experience), 1) FROM doctor GROUP BY specialty ORDER BY specialty',
  }),
  defineTemplate({
    id: 'appointments-per-status', answer: 'table', instances: 1,
    params: () => ({}),
    question: () => 'How many appointments are there with each status? Give the status and the count.',
    sql: () => 'SELECT status, COUNT(*) FROM appointment GROUP BY status ORDER BY status',
  }),
  defineTemplate({
    id: 'patient-medications', answer: 'list', instances: 4,
    params: (p) => ({ name: p.pair(TREATED_PATIENT) }),
    question: ({ name }) => `Which medications have been prescribed to ${name.join(' ')}? List each name once.`,
    sql: ({ name }) => `SELECT DISTINCT m.name FROM patient pa JOIN appointment a ON a.patient_id = pa.patient_id JOIN prescription p ON p.appointment_id = a.appointment_id JOIN medication m ON m.medication_id = p.medication_id WHERE ${named(name, 'pa')} ORDER BY m.name`,
  }),
  defineTemplate({
    id: 'prescriptions-by-specialty', answer: 'integer', instances: 3,
    params: (p) => ({ med: p.text(PRESCRIBED_MED), specialty: p.text(PRESCRIBING_SPECIALTY) }),
    question: ({ med, specialty }) => `How many prescriptions for ${med} were written by ${specialty} doctors?`,
    sql: ({ med, specialty }) => `SELECT COUNT(*) FROM prescription p JOIN medication m ON m.medication_id = p.medication_id JOIN appointment a ON a.appointment_id = p.appointment_id JOIN doctor d ON d.doctor_id = a.doctor_id WHERE m.name = ${t(med)} AND d.specialty = ${t(specialty)}`,
  }),
  defineTemplate({
    id: 'frequent-patients', answer: 'list', instances: 2,
    params: (p) => ({ n: p.int(5, 8) }),
    question: ({ n }) => `Which patients have booked more than ${n} appointments? Give their full names.`,
    sql: ({ n }) => `SELECT pa.first_name || ' ' || pa.last_name FROM patient pa JOIN appointment a ON a.patient_id = pa.patient_id GROUP BY pa.patient_id HAVING COUNT(*) > ${n} ORDER BY 1`,
  }),
  defineTemplate({
    id: 'doctors-never-prescribing', answer: 'list', instances: 1,
    params: () => ({}),
    question: () => 'Which doctors have never written a prescription? Give their full names.',
    sql: () => "SELECT first_name || ' ' || last_name FROM doctor WHERE doctor_id NOT IN (SELECT a.doctor_id FROM appointment a JOIN prescription p ON p.appointment_id = a.appointment_id) ORDER BY 1",
  }),
  defineTemplate({
    id: 'medications-never-prescribed', answer: 'list', instances: 1,
    params: () => ({}),
    question: () => 'Which medications in stock have never been prescribed?',
    sql: () => 'SELECT name FROM medication WHERE medication_id NOT IN (SELECT medication_id FROM prescription) ORDER BY name',
  }),
  defineTemplate({
    id: 'price-versus-average', answer: 'list', instances: 3,
    params: (p) => ({ drugClass: p.text(DRUG_CLASS), more: p.pick([true, false]) }),
    question: ({ drugClass, more }) => `Which ${drugClass} medications cost ${more ? 'more' : 'less'} than the average price of all medications?`,
    sql: ({ drugClass, more }) => `SELECT name FROM medication WHERE drug_class = ${t(drugClass)} AND unit_price ${more ? '>' : '<'} (SELECT AVG(unit_price) FROM medication) ORDER BY name`,
  }),
  defineTemplate({
    id: 'doctors-not-seeing-city', answer: 'list', instances: 3,
    params: (p) => ({ city: p.text(CITY) }),
    question: ({ city }) => `Which doctors have never had an appointment with a patient from ${city}? Give their full names.`,
    sql: ({ city }) => `SELECT first_name || ' ' || last_name FROM doctor EXCEPT SELECT d.first_name || ' ' || d.last_name FROM doctor d JOIN appointment a ON a.doctor_id = d.doctor_id JOIN patient pa ON pa.patient_id = a.patient_id WHERE pa.city = ${t(city)}`,
  }),
  defineTemplate({
    id: 'patients-seeing-two-specialties', answer: 'list', instances: 3,
    params: (p) => ({ specialties: p.twoTexts(SPECIALTY), city: p.text(CITY) }),
    question: ({ specialties: [a, b], city }) => `Which patients from ${city} have seen doctors in both ${a} and ${b}? Give their full names.`,
    sql: ({ specialties, city }) => {
      const seen = (specialty: string): string =>
        `SELECT pa.first_name || ' ' || pa.last_name FROM patient pa JOIN appointment a ON a.patient_id = pa.patient_id JOIN doctor d ON d.doctor_id = a.doctor_id WHERE pa.city = ${t(city)} AND d.specialty = ${t(specialty)}`;
      return `${seen(specialties[0])} INTERSECT ${seen(specialties[1])}`;
    },
  }),
  defineTemplate({
    id: 'doctor-fee-income', answer: 'float', instances: 3,
    params: (p) => ({ name: p.pair(DOCTOR) }),
    question: ({ name }) => `What is the total of consultation fees from ${dr(name)}'s completed appointments?`,
    sql: ({ name }) => `SELECT SUM(d.consultation_fee) FROM appointment a JOIN doctor d ON d.doctor_id = a.doctor_id WHERE ${named(name, 'd')} AND a.status = 'completed'`,
  }),
  defineTemplate({
    id: 'patient-appointments', answer: 'table', instances: 3,
    params: (p) => ({ name: p.pair(TREATED_PATIENT) }),
    question: ({ name }) => `List the date, time and status of every appointment of ${name.join(' ')}.`,
    sql: ({ name }) => `SELECT a.appointment_date, a.appointment_time, a.status FROM appointment a JOIN patient pa ON pa.patient_id = a.patient_id WHERE ${named(name, 'pa')} ORDER BY a.appointment_date, a.appointment_time`,
  }),
  defineTemplate({
    id: 'first-visit-of-patient', answer: 'string', instances: 2,
    params: (p) => ({ name: p.pair(TREATED_PATIENT) }),
    question: ({ name }) => `On what date did ${name.join(' ')} have their first appointment at the clinic?`,
    sql: ({ name }) => `SELECT MIN(a.appointment_date) FROM appointment a JOIN patient pa ON pa.patient_id = a.patient_id WHERE ${named(name, 'pa')}`,
  }),
  defineTemplate({
    id: 'most-experienced-in-specialty', answer: 'string', instances: 3,
    params: (p) => ({ specialty: p.text("SELECT specialty FROM doctor GROUP BY specialty HAVING COUNT(*) > 1 ORDER BY specialty") }),
    question: ({ specialty }) => `Which ${specialty} doctor has the most years of experience? Give the last name.`,
    sql: ({ specialty }) => `SELECT last_name FROM doctor WHERE specialty = ${t(specialty)} ORDER BY years_experience DESC LIMIT 1`,
    check: ({ specialty }) => noTieAfter(`SELECT years_experience FROM doctor WHERE specialty = ${t(specialty)} ORDER BY years_experience DESC`, 1),
  }),
  defineTemplate({
    id: 'appointments-in-month', answer: 'integer', instances: 3,
    params: (p) => ({ month: p.int(1, 12), year: p.pick([2023, 2024]) }),
    question: ({ month, year }) => `How many appointments were booked for ${MONTH_NAMES[month - 1] ?? ''} ${year}?`,
    sql: ({ month, year }) => `SELECT COUNT(*) FROM appointment WHERE strftime('%Y-%m', appointment_date) = '${year}-${String(month).padStart(2, '0')}'`,
  }),
  defineTemplate({
    id: 'average-dosage', answer: 'float', instances: 3,
    params: (p) => ({ med: p.text(PRESCRIBED_MED) }),
    question: ({ med }) => `What is the average prescribed dosage of ${med} in milligrams, rounded to one decimal?`,
    sql: ({ med }) => `SELECT ROUND(AVG(p.dosage_mg), 1) FROM prescription p JOIN medication m ON m.medication_id = p.medication_id WHERE m.name = ${t(med)}`,
  }),
  defineTemplate({
    id: 'most-prescribed-in-class', answer: 'string', instances: 2,
    params: (p) => ({ drugClass: p.text('SELECT DISTINCT m.drug_class FROM medication m JOIN prescription p ON p.medication_id = m.medication_id ORDER BY 1') }),
    question: ({ drugClass }) => `Which ${drugClass} medication has been prescribed most often?`,
    sql: ({ drugClass }) => `SELECT m.name FROM prescription p JOIN medication m ON m.medication_id = p.medication_id WHERE m.drug_class = ${t(drugClass)} GROUP BY m.medication_id ORDER BY COUNT(*) DESC LIMIT 1`,
    check: ({ drugClass }) => noTieAfter(`SELECT COUNT(*) FROM prescription p JOIN medication m ON m.medication_id = p.medication_id WHERE m.drug_class = ${t(drugClass)} GROUP BY m.medication_id ORDER BY COUNT(*) DESC`, 1),
  }),
  defineTemplate({
    id: 'latest-doctor-of-patient', answer: 'string', instances: 3,
    params: (p) => ({ name: p.pair(TREATED_PATIENT) }),
    question: ({ name }) => `Which doctor did ${name.join(' ')} see at their most recent completed appointment? Give the doctor's full name.`,
    sql: ({ name }) => `SELECT d.first_name || ' ' || d.last_name FROM appointment a JOIN patient pa ON pa.patient_id = a.patient_id JOIN doctor d ON d.doctor_id = a.doctor_id WHERE ${named(name, 'pa')} AND a.status = 'completed' ORDER BY a.appointment_date DESC, a.appointment_time DESC LIMIT 1`,
  }),
  defineTemplate({
    id: 'long-courses-of-treatment', answer: 'table', instances: 2,
    params: (p) => ({ days: p.pick([30, 90]) }),
    question: ({ days }) => `For each medication prescribed for ${days} days or more at least once, give its name and how many such prescriptions there are.`,
    sql: ({ days }) => `SELECT m.name, COUNT(*) FROM prescription p JOIN medication m ON m.medication_id = p.medication_id WHERE p.duration_days >= ${days} GROUP BY m.medication_id ORDER BY m.name`,
  }),
];
