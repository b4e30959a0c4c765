import { defineTemplate, noTieAfter, sqlText as t, type QuestionTemplate } from '../question-template.ts';

const DEPT = 'SELECT name FROM departments ORDER BY dept_id';
const TAUGHT_COURSE = 'SELECT DISTINCT c.title FROM courses c JOIN enrollments e ON e.course_id = c.course_id ORDER BY c.title';
const STUDENT = 'SELECT DISTINCT s.first_name, s.last_name FROM students s JOIN enrollments e ON e.student_id = s.student_id ORDER BY s.student_id';
const SEMESTER = 'SELECT DISTINCT semester FROM enrollments ORDER BY semester';
const GRADED_SEMESTER = 'SELECT DISTINCT semester FROM enrollments WHERE grade IS NOT NULL ORDER BY semester';

const person = (name: readonly [string, string], alias: string): string =>
  `${alias}.first_name = ${t(name[0])} AND ${alias}.last_name = ${t(name[1])}`;

export const universityTemplates: readonly QuestionTemplate[] = [
  defineTemplate({
    id: 'majors-in-department', answer: 'integer', instances: 4,
    params: (p) => ({ dept: p.text(DEPT) }),
    question: ({ dept }) => `How many students are majoring in ${dept}?`,
    sql: ({ dept }) => `SELECT COUNT(*) FROM students s JOIN departments d ON d.dept_id = s.major_dept_id WHERE d.name = ${t(dept)}`,
  }),
  defineTemplate({
    id: 'courses-in-department', answer: 'integer', instances: 3,
    params: (p) => ({ dept: p.text(DEPT) }),
    question: ({ dept }) => `How many courses does the ${dept} department offer?`,
    sql: ({ dept }) => `SELECT COUNT(*) FROM courses c JOIN departments d ON d.dept_id = c.dept_id WHERE d.name = ${t(dept)}`,
  }),
  defineTemplate({
    id: 'department-building', answer: 'string', instances: 3,
    params: (p) => ({ dept: p.text(DEPT) }),
    question: ({ dept }) => `In which building is the ${dept} department located?`,
    sql: ({ dept }) => `SELECT building FROM departments WHERE name = ${t(dept)}`,
  }),
  defineTemplate({
    id: 'departments-in-building', answer: 'list', instances: 1,
    params: () => ({}),
    question: () => 'Which departments share their building with another department?',
    sql: () => 'SELECT name FROM departments WHERE building IN (SELECT building FROM departments GROUP BY building HAVING COUNT(*) > 1) ORDER BY name',
  }),
  defineTemplate({
    id: 'course-credits', answer: 'integer', instances: 3,
    params: (p) => ({ course: p.pair('SELECT code, title FROM courses ORDER BY course_id') }),
    question: ({ course }) => `How many credits is the course ${course[0]} (${course[1]}) worth?`,
    sql: ({ course }) => `SELECT credits FROM courses WHERE code = ${t(course[0])}`,
  }),
  defineTemplate({
    id: 'average-salary-in-department', answer: 'float', instances: 3,
    params: (p) => ({ dept: p.text(DEPT) }),
    question: ({ dept }) => `What is the average salary of instructors in the ${dept} department, rounded to two decimals?`,
    sql: ({ dept }) => `SELECT ROUND(AVG(i.salary), 2) FROM instructors i JOIN departments d ON d.dept_id = i.dept_id WHERE d.name = ${t(dept)}`,
  }),
  defineTemplate({
    id: 'course-instructor', answer: 'string', instances: 3,
    params: (p) => ({ course: p.text('SELECT title FROM courses WHERE instructor_id IS NOT NULL ORDER BY course_id') }),
    question: ({ course }) => `Who teaches ${course}? Give the instructor's full name.`,
    sql: ({ course }) => `SELECT i.first_name || ' ' || i.last_name FROM courses c JOIN instructors i ON i.instructor_id = c.instructor_id WHERE c.title = ${t(course)}`,
  }),
  defineTemplate({
    id: 'courses-by-credits', answer: 'list', instances: 3,
    params: (p) => ({ dept: p.text(DEPT), credits: p.pick([3, 4]) }),
    question: ({ dept, credits }) => `List the titles of ${dept} courses worth at least ${credits} credits.`,
    sql: ({ dept, credits }) => `SELECT c.title FROM courses c JOIN departments d ON d.dept_id = c.dept_id WHERE d.name = ${t(dept)} AND c.credits >= ${credits} ORDER BY c.title`,
  }),
  defineTemplate({
    id: 'students-enrolled-in-year', answer: 'integer', instances: 3,
    params: (p) => ({ year: p.int(2019, 2024) }),
    question: ({ year }) => `How many students started at the university in ${year}?`,
    sql: ({ year }) => `SELECT COUNT(*) FROM students WHERE enrollment_year = ${year}`,
  }),
  defineTemplate({
    id: 'course-enrollment-in-semester', answer: 'integer', instances: 4,
    params: (p) => ({ course: p.text(TAUGHT_COURSE), semester: p.text(SEMESTER) }),
    question: ({ course, semester }) => `How many students took ${course} in ${semester}?`,
    sql: ({ course, semester }) => `SELECT COUNT(*) FROM enrollments e JOIN courses c ON c.course_id = e.course_id WHERE c.title = ${t(course)} AND e.semester = ${t(semester)}`,
  }),
  defineTemplate({
    id: 'average-course-score', answer: 'float', instances: 3,
    params: (p) => ({ course: p.text(TAUGHT_COURSE) }),
    question: ({ course }) => `What is the average score of students in ${course}, rounded to one decimal? Ignore enrollments that have no score yet.`,
    sql: ({ course }) => `SELECT ROUND(AVG(e.score), 1) FROM enrollments e JOIN courses c ON c.course_id = e.course_id WHERE c.title = ${t(course)} AND e.score IS NOT NULL`,
  }),
  defineTemplate({
    id: 'score-range-in-course', answer: 'float', instances: 2,
    params: (p) => ({ course: p.text(TAUGHT_COURSE), lowest: p.pick([true, false]) }),
    question: ({ course, lowest }) => `What is the ${lowest ? 'lowest' : 'highest'} score any student has received in ${course}?`,
    sql: ({ course, lowest }) => `SELECT ${lowest ? 'MIN' : 'MAX'}(e.score) FROM enrollments e JOIN courses c ON c.course_id = e.course_id WHERE c.title = ${t(course)}`,
  }),
  defineTemplate({
    id: 'instructors-per-department', answer: 'table', instances: 1,
    params: () => ({}),
    question: () => 'For each department, give its name and the number of instructors who belong to it.',
    sql: () => 'SELECT d.name, COUNT(i.instructor_id) FROM departments d LEFT JOIN instructors i ON i.dept_id = d.dept_id GROUP BY d.dept_id ORDER BY d.name',
  }),
  defineTemplate({
    id: 'courses-of-instructor', answer: 'table', instances: 3,
    params: (p) => ({ name: p.pair('SELECT DISTINCT i.first_name, i.last_name FROM instructors i JOIN courses c ON c.instructor_id = i.instructor_id ORDER BY i.instructor_id') }),
    question: ({ name }) => `List the code and title of every course taught by ${name.join(' ')}.`,
    sql: ({ name }) => `SELECT c.code, c.title FROM courses c JOIN instructors i ON i.instructor_id = c.instructor_id WHERE ${person(name, 'i')} ORDER BY c.code`,
  }),
  defineTemplate({
    id: 'popular-courses', answer: 'list', instances: 3,
    params: (p) => ({ n: p.int(10, 20) }),
    question: ({ n }) => `Which courses have had more than ${n} enrollments in total? Give their codes.`,
    sql: ({ n }) => `SELECT c.code FROM courses c JOIN enrollments e ON e.course_id = c.course_id GROUP BY c.course_id HAVING COUNT(*) > ${n} ORDER BY c.code`,
  }),
  defineTemplate({
    id: 'busy-semesters', answer: 'table', instances: 2,
    params: (p) => ({ n: p.int(40, 110) }),
    question: ({ n }) => `For each semester with more than ${n} enrollments, give the semester and its number of enrollments.`,
    sql: ({ n }) => `SELECT semester, COUNT(*) FROM enrollments GROUP BY semester HAVING COUNT(*) > ${n} ORDER BY semester`,
  }),
  defineTemplate({
    id: 'students-never-enrolled', answer: 'list', instances: 1,
    params: () => ({}),
    question: () => 'Which students have never enrolled in a course? Give their full names.',
    sql: () => "SELECT first_name || ' ' || last_name FROM students WHERE student_id NOT IN (SELECT student_id FROM enrollments) ORDER BY 1",
  }),
  defineTemplate({
    id: 'instructors-without-course', answer: 'list', instances: 1,
    params: () => ({}),
    question: () => 'Which instructors are not assigned to any course? Give their full names.',
    sql: () => "SELECT first_name || ' ' || last_name FROM instructors WHERE instructor_id NOT IN (SELECT instructor_id FROM courses WHERE instructor_id IS NOT NULL) ORDER BY 1",
  }),
  defineTemplate({
    id: 'unassigned-courses', answer: 'list', instances: 1,
    params: () => ({}),
    question: () => 'Which courses have no instructor assigned? Give their titles.',
    sql: () => 'SELECT title FROM courses WHERE instructor_id IS NULL ORDER BY title',
  }),
  defineTemplate({
    id: 'well-paid-instructors', answer: 'list', instances: 3,
    params: (p) => ({ dept: p.text(DEPT) }),
    question: ({ dept }) => `Which instructors in the ${dept} department earn more than the average salary of all instructors? Give their last names.`,
    sql: ({ dept }) => `SELECT i.last_name FROM instructors i JOIN departments d ON d.dept_id = i.dept_id WHERE d.name = ${t(dept)} AND i.salary > (SELECT AVG(salary) FROM instructors) ORDER BY i.last_name`,
  }),
  defineTemplate({
    id: 'highest-paid-in-department', answer: 'string', instances: 3,
    params: (p) => ({ dept: p.text(DEPT) }),
    question: ({ dept }) => `Who is the highest-paid instructor in the ${dept} department? Give the full name.`,
    sql: ({ dept }) => `SELECT i.first_name || ' ' || i.last_name FROM instructors i JOIN departments d ON d.dept_id = i.dept_id WHERE d.name = ${t(dept)} ORDER BY i.salary DESC LIMIT 1`,
    check: ({ dept }) => noTieAfter(`SELECT i.salary FROM instructors i JOIN departments d ON d.dept_id = i.dept_id WHERE d.name = ${t(dept)} ORDER BY i.salary DESC`, 1),
  }),
  defineTemplate({
    id: 'department-courses-not-taken', answer: 'list', instances: 3,
    params: (p) => ({ name: p.pair(STUDENT), dept: p.text(DEPT) }),
    question: ({ name, dept }) => `Which ${dept} courses has ${name.join(' ')} not taken? Give the course codes.`,
    sql: ({ name, dept }) =>
      `SELECT c.code FROM courses c JOIN departments d ON d.dept_id = c.dept_id WHERE d.name = ${t(dept)} EXCEPT SELECT c.code FROM courses c JOIN enrollments e ON e.course_id = c.course_id JOIN students s ON s.student_id = e.student_id WHERE ${person(name, 's')}`,
  }),
  defineTemplate({
    id: 'took-both-courses', answer: 'list', instances: 3,
    params: (p) => ({ dept: p.text(DEPT) }),
    question: ({ dept }) => `Which students have taken both of the two ${dept} courses with the most enrollments? Give their full names.`,
    sql: ({ dept }) => {
      // The two most popular courses of the department, fixed by the check below.
      const takers = (offset: number): string =>
        `SELECT s.first_name || ' ' || s.last_name FROM students s JOIN enrollments e ON e.student_id = s.student_id WHERE e.course_id = (SELECT c.course_id FROM courses c JOIN departments d ON d.dept_id = c.dept_id JOIN enrollments x ON x.course_id = c.course_id WHERE d.name = ${t(dept)} GROUP BY c.course_id ORDER BY COUNT(*) DESC LIMIT 1 OFFSET ${offset})`;
      return `${takers(0)} INTERSECT ${takers(1)}`;
    },
    check: ({ dept }) => noTieAfter(`SELECT COUNT(*) FROM courses c JOIN departments d ON d.dept_id = c.dept_id JOIN enrollments x ON x.course_id = c.course_id WHERE d.name = ${t(dept)} GROUP BY c.course_id ORDER BY COUNT(*) DESC`, 2),
  }),
  defineTemplate({
    id: 'took-course-pair', answer: 'list', instances: 3,
    params: (p) => ({ courses: p.twoTexts(TAUGHT_COURSE) }),
    question: ({ courses: [a, b] }) => `Which students have taken both ${a} and ${b}? Give their full names.`,
    sql: ({ courses }) => {
      const takers = (course: string): string =>
        `SELECT s.first_name || ' ' || s.last_name FROM students s JOIN enrollments e ON e.student_id = s.student_id JOIN courses c ON c.course_id = e.course_id WHERE c.title = ${t(course)}`;
      return `${takers(courses[0])} INTERSECT ${takers(courses[1])}`;
    },
  }),
  defineTemplate({
    id: 'student-transcript', answer: 'table', instances: 4,
    params: (p) => ({ name: p.pair(STUDENT), semester: p.text(GRADED_SEMESTER) }),
    question: ({ name, semester }) => `List the course titles ${name.join(' ')} took in ${semester} together with the letter grade received.`,
    sql: ({ name, semester }) => `SELECT c.title, e.grade FROM enrollments e JOIN students s ON s.student_id = e.student_id JOIN courses c ON c.course_id = e.course_id WHERE ${person(name, 's')} AND e.semester = ${t(semester)} ORDER BY c.title`,
  }),
  defineTemplate({
    id: 'instructors-of-student', answer: 'list', instances: 3,
    params: (p) => ({ name: p.pair(STUDENT) }),
    question: ({ name }) => `Which instructors have taught courses that ${name.join(' ')} enrolled in? Give their last names.`,
    sql: ({ name }) => `SELECT DISTINCT i.last_name FROM students s JOIN enrollments e ON e.student_id = s.student_id JOIN courses c ON c.course_id = e.course_id JOIN instructors i ON i.instructor_id = c.instructor_id WHERE ${person(name, 's')} ORDER BY i.last_name`,
  }),
  defineTemplate({
    id: 'a-students-in-department', answer: 'integer', instances: 3,
    params: (p) => ({ dept: p.text(DEPT), grade: p.pick(['A', 'B']) }),
    question: ({ dept, grade }) => `How many different students have received a grade of ${grade} in a course of the ${dept} department?`,
    sql: ({ dept, grade }) => `SELECT COUNT(DISTINCT e.student_id) FROM enrollments e JOIN courses c ON c.course_id = e.course_id JOIN departments d ON d.dept_id = c.dept_id WHERE d.name = ${t(dept)} AND e.grade = '${grade}'`,
  }),
  defineTemplate({
    id: 'grades-in-course', answer: 'list', instances: 2,
    params: (p) => ({ course: p.text(TAUGHT_COURSE) }),
    question: ({ course }) => `Which distinct letter grades have been given in ${course}?`,
    sql: ({ course }) => `SELECT DISTINCT e.grade FROM enrollments e JOIN courses c ON c.course_id = e.course_id WHERE c.title = ${t(course)} AND e.grade IS NOT NULL ORDER BY e.grade`,
  }),
  defineTemplate({
    id: 'longest-serving-instructor', answer: 'table', instances: 2,
    params: (p) => ({ rank: p.text('SELECT DISTINCT rank FROM instructors ORDER BY rank') }),
    question: ({ rank }) => `Which instructor with the rank ${rank} was hired first? Give the first name, last name and hire date.`,
    sql: ({ rank }) => `SELECT first_name, last_name, hire_date FROM instructors WHERE rank = ${t(rank)} ORDER BY hire_date LIMIT 1`,
    check: ({ rank }) => noTieAfter(`SELECT hire_date FROM instructors WHERE rank = ${t(rank)} ORDER BY hire_date`, 1),
  }),
  defineTemplate({
    id: 'undeclared-students', answer: 'integer', instances: 1,
    params: () => ({}),
    question: () => 'How many students have not declared a major?',
    sql: () => 'SELECT COUNT(*) FROM students WHERE major_dept_id IS NULL',
  }),
];
