import type { DomainSpec, RowData, TableSpec } from '../domain-spec.ts';
import { randomDate } from '../dates.ts';
import type { Mulberry32 } from '@sqlenv/shared';
import { emailFor, STANDARD_VOCABULARY, uniqueNames, type Vocabulary } from '../vocabulary.ts';
import { universityTemplates } from './university-questions.ts';

/** A university registry in plain snake_case, the style most Spider schemas use. */
const tables: readonly TableSpec[] = [
  {
    name: 'departments',
    columns: [
      { name: 'dept_id', type: 'INTEGER', primaryKey: true },
      { name: 'name', type: 'TEXT' },
      { name: 'building', type: 'TEXT' },
      { name: 'budget', type: 'REAL' },
      { name: 'founded_year', type: 'INTEGER' },
    ],
  },
  {
    name: 'instructors',
    columns: [
      { name: 'instructor_id', type: 'INTEGER', primaryKey: true },
      { name: 'first_name', type: 'TEXT' },
      { name: 'last_name', type: 'TEXT' },
      { name: 'dept_id', type: 'INTEGER', references: { table: 'departments', column: 'dept_id' } },
      { name: 'rank', type: 'TEXT' },
      { name: 'hire_date', type: 'TEXT', temporal: true },
      { name: 'salary', type: 'INTEGER' },
    ],
  },
  {
    name: 'courses',
    columns: [
      { name: 'course_id', type: 'INTEGER', primaryKey: true },
      { name: 'code', type: 'TEXT' },
      { name: 'title', type: 'TEXT' },
      { name: 'dept_id', type: 'INTEGER', references: { table: 'departments', column: 'dept_id' } },
      { name: 'credits', type: 'INTEGER' },
      { name: 'instructor_id', type: 'INTEGER', nullable: true, references: { table: 'instructors', column: 'instructor_id' } },
    ],
  },
  {
    name: 'students',
    columns: [
      { name: 'student_id', type: 'INTEGER', primaryKey: true },
      { name: 'first_name', type: 'TEXT' },
      { name: 'last_name', type: 'TEXT' },
      { name: 'email', type: 'TEXT' },
      { name: 'major_dept_id', type: 'INTEGER', nullable: true, references: { table: 'departments', column: 'dept_id' } },
      { name: 'enrollment_year', type: 'INTEGER' },
    ],
  },
  {
    name: 'enrollments',
    columns: [
      { name: 'enrollment_id', type: 'INTEGER', primaryKey: true },
      { name: 'student_id', type: 'INTEGER', references: { table: 'students', column: 'student_id' } },
      { name: 'course_id', type: 'INTEGER', references: { table: 'courses', column: 'course_id' } },
      { name: 'semester', type: 'TEXT' },
      { name: 'score', type: 'REAL', nullable: true },
      { name: 'grade', type: 'TEXT', nullable: true },
    ],
  },
];

/** Department, building, code prefix, founding year and course titles. */
const DEPARTMENTS: readonly (readonly [name: string, building: string, prefix: string, founded: number, courses: readonly string[]])[] = [
  ['Computer Science', 'Turing Hall', 'CS', 1968, ['Introduction to Programming', 'Data Structures', 'Algorithms', 'Databases', 'Operating Systems', 'Machine Learning', 'Computer Networks']],
  ['Mathematics', 'Euler Building', 'MATH', 1890, ['Calculus I', 'Calculus II', 'Linear Algebra', 'Probability', 'Abstract Algebra', 'Number Theory']],
  ['Physics', 'Curie Hall', 'PHYS', 1895, ['Classical Mechanics', 'Electromagnetism', 'Quantum Physics', 'Thermodynamics', 'Astrophysics']],
  ['Chemistry', 'Curie Hall', 'CHEM', 1902, ['General Chemistry', 'Organic Chemistry', 'Physical Chemistry', 'Biochemistry']],
  ['Biology', 'Darwin Centre', 'BIO', 1921, ['Cell Biology', 'Genetics', 'Ecology', 'Microbiology', 'Evolution']],
  ['History', 'Gibbon Hall', 'HIST', 1885, ['Ancient Civilisations', 'Medieval Europe', 'Modern World History', 'History of Science']],
  ['Economics', 'Keynes House', 'ECON', 1947, ['Microeconomics', 'Macroeconomics', 'Econometrics', 'Development Economics', 'Game Theory']],
  ['English Literature', 'Austen Building', 'ENG', 1899, ['Shakespeare', 'The Victorian Novel', 'Modern Poetry', 'Creative Writing']],
];

const RANKS = [['Professor', 3], ['Associate Professor', 3], ['Assistant Professor', 3], ['Lecturer', 2]] as const;
/** Salary band per rank, in dollars per year. */
const SALARY_BANDS: Readonly<Record<(typeof RANKS)[number][0], readonly [number, number]>> = {
  Professor: [120_000, 170_000],
  'Associate Professor': [95_000, 130_000],
  'Assistant Professor': [78_000, 100_000],
  Lecturer: [55_000, 75_000],
};
const SEMESTERS = ['Fall 2022', 'Spring 2023', 'Fall 2023', 'Spring 2024', 'Fall 2024'] as const;
/** The semester in progress: its enrollments have no score or grade yet. */
const CURRENT_SEMESTER = 'Fall 2024';

function letterGrade(score: number): string {
  if (score >= 90) return 'A';
  if (score >= 80) return 'B';
  if (score >= 70) return 'C';
  if (score >= 60) return 'D';
  return 'F';
}

function generateRows(rng: Mulberry32, vocabulary: Vocabulary = STANDARD_VOCABULARY): Map<string, RowData[]> {
  const departments = DEPARTMENTS.map(([name, building, , founded], i): RowData => ({
    dept_id: i + 1,
    name,
    building,
    budget: rng.int(60, 260) * 10_000,
    founded_year: founded,
  }));

  const people = uniqueNames(rng.fork('names'), 32 + 170, vocabulary);
  const instructors = people.slice(0, 32).map(([first, last], i): RowData => {
    const rank = rng.weighted(RANKS);
    const [low, high] = SALARY_BANDS[rank];
    return {
      instructor_id: i + 1,
      first_name: first,
      last_name: last,
      // The first eight cover every department once; the rest spread at random.
      dept_id: i < DEPARTMENTS.length ? i + 1 : rng.int(1, DEPARTMENTS.length),
      rank,
      hire_date: randomDate(rng, '1996-01-01', '2023-08-31'),
      salary: rng.int(low, high),
    };
  });

  const courses: RowData[] = [];
  DEPARTMENTS.forEach(([, , prefix, , titles], d) => {
    const staff = instructors.filter((row) => row.dept_id === d + 1);
    titles.forEach((title, level) => {
      courses.push({
        course_id: courses.length + 1,
        // One hundred-block per course keeps codes unique within a department.
        code: `${prefix}${100 * (level + 1) + rng.int(1, 60)}`,
        title,
        dept_id: d + 1,
        credits: rng.weighted([[3, 5], [4, 3], [2, 1], [5, 1]]),
        instructor_id: rng.chance(0.12) ? null : (rng.pick(staff).instructor_id ?? null),
      });
    });
  });

  const students = people.slice(32).map(([first, last], i): RowData => ({
    student_id: i + 1,
    first_name: first,
    last_name: last,
    email: emailFor(first, last, 'students.example.edu', i + 1),
    major_dept_id: rng.chance(0.08) ? null : rng.int(1, DEPARTMENTS.length),
    enrollment_year: rng.int(2019, 2024),
  }));

  const enrollments: RowData[] = [];
  for (const student of students) {
    // A few students have not enrolled in anything yet.
    if (rng.chance(0.05)) continue;
    const major = student.major_dept_id;
    const ownCourses = courses.filter((c) => c.dept_id === major);
    const taken = new Set<number>();
    const count = rng.int(2, 5);
    for (let k = 0; k < count; k++) {
      const course = ownCourses.length > 0 && rng.chance(0.7) ? rng.pick(ownCourses) : rng.pick(courses);
      const courseId = Number(course.course_id);
      if (taken.has(courseId)) continue;
      taken.add(courseId);
      const startYear = Number(student.enrollment_year);
      const semesters = SEMESTERS.filter((s) => Number(s.slice(-4)) >= startYear);
      const semester = rng.pick(semesters.length > 0 ? semesters : [CURRENT_SEMESTER]);
      const finished = semester !== CURRENT_SEMESTER;
      const score = finished ? Math.round((45 + rng.float() * 55) * 10) / 10 : null;
      enrollments.push({
        enrollment_id: enrollments.length + 1,
        student_id: student.student_id ?? null,
        course_id: courseId,
        semester,
        score,
        grade: score === null ? null : letterGrade(score),
      });
    }
  }

  return new Map([
    ['departments', departments],
    ['instructors', instructors],
    ['courses', courses],
    ['students', students],
    ['enrollments', enrollments],
  ]);
}

export const university: DomainSpec = {
  dbId: 'university',
  title: 'University',
  summary: 'A university registry: departments, instructors, courses, students and their enrollments with scores and letter grades.',
  tables,
  generateRows,
  templates: universityTemplates,
};
